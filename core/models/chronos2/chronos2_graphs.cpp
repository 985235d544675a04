#include "core/models/chronos2/chronos2_graphs.h"

#include <ATen/TensorOperators.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>

#include "core/common/status.h"
#include "core/runtime/cuda_graph.h"

namespace cn::chronos2 {
namespace {

int64_t bucket_rows(int64_t b) {
    int64_t p = 1;
    while (p < b) p <<= 1;
    return p;
}

// Group ids of padding rows: distinct from each other and from any real id.
constexpr int64_t kPadGroupBase = int64_t{1} << 40;

}  // namespace

struct GraphCache::Entry {
    at::cuda::CUDAGraph graph;
    at::Tensor context, group_ids, future, out;
    int64_t stale_rows = 0;    // rows [0, stale_rows) of the inputs may hold an earlier call's series; the rest hold padding
    at::cuda::CUDAEvent done;  // recorded after the last replay's output was copied: a replay on another stream waits for it
    ~Entry() {
        try {
            done.synchronize();  // an evicted graph's last replay has finished before its buffers go
        } catch (...) {}
    }
};

GraphCache::GraphCache(const Chronos2Config& cfg, const Chronos2Weights& w, c10::ScalarType dtype, c10::Device device, ForwardFn fn,
                       size_t max_graphs)
    : cfg_(cfg),
      w_(w),
      dtype_(dtype),
      device_(device),
      fn_(fn),
      pool_([device] { return reserved_bytes(device); }),
      entries_(pool_, max_graphs) {
    if (!device.is_cuda()) fail(Status::kUnsupported, "graph mode needs a CUDA device");
}

GraphCache::~GraphCache() = default;

std::unique_ptr<GraphCache::Entry> GraphCache::capture(const Key& key) {
    const auto [B, L, N, has_future, singleton, lane] = key;
    auto e = std::make_unique<Entry>();
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device_);
    e->context = at::zeros({B, L}, f32);
    e->group_ids = at::arange(B, f32.dtype(at::kLong)) + kPadGroupBase;
    if (has_future) e->future = at::full({B, N * cfg_.patch_size}, std::numeric_limits<float>::quiet_NaN(), f32);

    capture_graph(
        e->graph, device_,
        [&] {
            for (int i = 0; i < 2; ++i) fn_(cfg_, w_, dtype_, e->context, e->group_ids, e->future, N, singleton);
        },
        [&] { e->out = fn_(cfg_, w_, dtype_, e->context, e->group_ids, e->future, N, singleton); }, nullptr, capture_stream(lane));
    return e;
}

c10::Stream GraphCache::capture_stream(int lane) {
    std::unique_ptr<StreamLanes>& s = capture_streams_[lane];
    if (!s) s = std::make_unique<StreamLanes>(device_, 1);
    return s->stream(0);
}

at::Tensor GraphCache::run(const at::Tensor& context, const at::Tensor& group_ids, const at::Tensor& future, int64_t N, bool singleton,
                           int lane) {
    const GraphPool::Lock lock = pool_.lock();
    c10::cuda::CUDAGuard device_guard(device_);
    const int64_t B = context.size(0), L = context.size(1);
    const Key key{bucket_rows(B), L, N, future.defined(), singleton, lane};
    // Captured on first use (the entry's bytes: what the allocator reserved meanwhile), the least recently used
    // entry evicted first when max_graphs are held.
    Entry& e = entries_.get(lock, key, [&] { return capture(key); });
    // The static buffers are free once the previous replay's output was copied, which may have been queued on
    // another stream (another thread's lane); on the same stream this wait is already implied.
    const at::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream();
    e.done.block(stream);
    // Real rows first; padding rows hold a constant series, their own groups and no future values: written at capture,
    // and rewritten only where an earlier call of this bucket left real rows. The inputs may be page-locked host
    // tensors (copied straight into the graph's buffers, asynchronously) or device tensors. Singleton-group passes
    // never read the group ids.
    const int64_t stale = e.stale_rows;
    e.stale_rows = std::max(stale, B);
    e.context.slice(0, 0, B).copy_(context, /*non_blocking=*/true);
    if (!singleton) e.group_ids.slice(0, 0, B).copy_(group_ids, /*non_blocking=*/true);
    if (future.defined()) e.future.slice(0, 0, B).copy_(future, /*non_blocking=*/true);
    if (stale > B) {
        e.context.slice(0, B, stale).fill_(0.0);
        if (!singleton) e.group_ids.slice(0, B, stale).copy_(at::arange(B, stale, e.group_ids.options()) + kPadGroupBase);
        if (future.defined()) e.future.slice(0, B, stale).fill_(std::numeric_limits<double>::quiet_NaN());
    }
    e.stale_rows = B;
    e.graph.replay();
    at::Tensor out = e.out.slice(0, 0, B).clone();
    e.done.record(stream);
    return out;
}

uint64_t GraphCache::pool_bytes() const { return pool_.bytes(); }

size_t GraphCache::size() const {
    const GraphPool::Lock lock = pool_.lock();
    return entries_.size(lock);
}

}  // namespace cn::chronos2
