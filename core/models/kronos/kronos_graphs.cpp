#include "core/models/kronos/kronos_graphs.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>

#include "core/common/status.h"
#include "core/runtime/cuda_graph.h"

namespace cn::kronos {

KronosGraphs::KronosGraphs(const PredictorConfig& cfg, const PredictorWeights& w, c10::Device device)
    : cfg_(cfg), w_(w), device_(device), gen_(at::cuda::detail::createCUDAGenerator(device.index())) {
    if (!device.is_cuda()) fail(Status::kUnsupported, "graph mode needs a CUDA device");
}

KronosGraphs::~KronosGraphs() = default;

KronosGraphs::Entry& KronosGraphs::get(int64_t N, double temperature, int64_t top_k, double top_p) {
    const Key key{N, temperature, top_k, top_p};
    auto it = entries_.find(key);
    if (it != entries_.end()) {
        it->second->last_used = ++tick_;
        return *it->second;
    }
    if (entries_.size() >= kMaxEntries) {
        auto victim = entries_.begin();
        for (auto e = entries_.begin(); e != entries_.end(); ++e) {
            if (e->second->last_used < victim->second->last_used) victim = e;
        }
        pool_bytes_ -= victim->second->bytes;
        entries_.erase(victim);
    }
    c10::cuda::CUDAGuard guard(device_);
    const int64_t before = reserved_bytes(device_);
    const int64_t M = cfg_.max_context, d = cfg_.d_model;
    auto e = std::make_unique<Entry>();
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device_);
    const auto act = f32.dtype(w_.emb_s1.scalar_type());  // caches in the model's dtype
    const auto i64 = f32.dtype(at::kLong);
    KronosStepState& st = e->st;
    const int64_t H = w_.blocks.empty() ? 1 : w_.blocks[0].heads;
    for (size_t l = 0; l < w_.blocks.size(); ++l) {
        st.cache.k.push_back(at::zeros({N, H, M, d / H}, act));
        st.cache.v.push_back(at::zeros({N, H, M, d / H}, act));
    }
    st.cache.dep_k = at::zeros({N, w_.dep_heads, M, d / w_.dep_heads}, act);
    st.cache.dep_v = at::zeros({N, w_.dep_heads, M, d / w_.dep_heads}, act);
    st.hist1 = at::zeros({N, M + 1}, i64);
    st.hist2 = at::zeros({N, M + 1}, i64);
    st.stamps = at::zeros({N, M, 5}, f32);
    st.pos = at::zeros({1}, i64);
    capture_graph(
        e->graph, device_,
        [&] {  // two steps, then rewind the position: the capture starts from the same state
            for (int i = 0; i < 2; ++i) decode_step_static(cfg_, w_, st, temperature, top_k, top_p, gen_);
            st.pos.zero_();
        },
        [&] { decode_step_static(cfg_, w_, st, temperature, top_k, top_p, gen_); }, &gen_);
    e->bytes = static_cast<uint64_t>(std::max<int64_t>(0, reserved_bytes(device_) - before));
    pool_bytes_ += e->bytes;
    e->last_used = ++tick_;
    auto& slot = entries_[key];
    slot = std::move(e);
    return *slot;
}

}  // namespace cn::kronos
