#include "core/models/toto/toto_graphs.h"

#include <array>

#include <ATen/Functions.h>
#include <ATen/cuda/CUDAGraph.h>

#include "core/common/status.h"
#include "core/models/toto/toto_pipeline.h"
#include "core/runtime/cuda_graph.h"

namespace cn::toto {

// One captured rollout: its shape, its static inputs, the graph and its output (in the graph's pool).
struct TotoGraphs::Entry {
    std::array<int64_t, 7> key{};  // rows R, variates V, history L, horizon H, rounded horizon, copies, prefill rows
    at::Tensor rin, rpm;
    Mixture prefill;
    std::unique_ptr<KvCache> prefill_cache, cache;
    at::cuda::CUDAGraph graph;
    at::Tensor out;
    bool captured = false;
    int64_t bytes = 0;
    std::mutex use;
};

std::unique_ptr<TotoGraphs> TotoGraphs::create(c10::Device device, at::Generator gen) {
    if (!device.is_cuda()) fail(Status::kUnsupported, "graph mode needs a CUDA device");
    return std::unique_ptr<TotoGraphs>(new TotoGraphs(device, std::move(gen)));
}

TotoGraphs::~TotoGraphs() = default;

uint64_t TotoGraphs::pool_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t n = 0;
    for (const auto& e : entries_) n += static_cast<uint64_t>(std::max<int64_t>(e->bytes, 0));
    return n;
}

std::vector<at::Tensor> TotoGraphs::run(const TotoConfig& c, const TotoWeights& w, const Rotary& rot, const Mixture& prefill,
                                        const KvCache& prefill_cache, const at::Tensor& rin, const at::Tensor& rpm, int64_t H,
                                        int64_t rounded, int64_t copies, int64_t batches, at::Generator& gen, RunContext& run) {
    const std::array<int64_t, 7> key{rin.size(0), rin.size(1), rin.size(2), H, rounded, copies, prefill_cache.rows()};
    std::shared_ptr<Entry> e;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if ((*it)->key == key) {
                e = *it;
                entries_.splice(entries_.begin(), entries_, it);
                break;
            }
        }
        if (!e) {
            e = std::make_shared<Entry>();
            e->key = key;
            e->rin = at::empty_like(rin);
            e->rpm = at::empty_like(rpm);
            e->prefill = Mixture{at::empty_like(prefill.df),    at::empty_like(prefill.loc),       at::empty_like(prefill.scale),
                                 at::empty_like(prefill.probs), at::empty_like(prefill.patch_loc), at::empty_like(prefill.patch_scale)};
            e->prefill_cache = std::make_unique<KvCache>(c, prefill_cache.rows(), prefill_cache.max_patches(), prefill_cache.device(),
                                                         prefill_cache.dtype());
            const int64_t P = c.patch_size;
            e->cache = std::make_unique<KvCache>(c, rin.size(0) * rin.size(1), (rin.size(2) + rounded + P - 1) / P, prefill_cache.device(),
                                                 prefill_cache.dtype());
            entries_.push_front(e);
            if (entries_.size() > kMaxEntries) entries_.pop_back();  // a caller still holding it keeps it alive
        }
    }
    std::lock_guard<std::mutex> use(e->use);
    e->rin.copy_(rin);
    e->rpm.copy_(rpm);
    for (auto [dst, src] :
         {std::pair{&e->prefill.df, &prefill.df}, std::pair{&e->prefill.loc, &prefill.loc}, std::pair{&e->prefill.scale, &prefill.scale},
          std::pair{&e->prefill.probs, &prefill.probs}, std::pair{&e->prefill.patch_loc, &prefill.patch_loc},
          std::pair{&e->prefill.patch_scale, &prefill.patch_scale}}) {
        dst->copy_(*src);
    }
    e->prefill_cache->copy_from(prefill_cache);
    if (!e->captured) {
        run.check();
        const int64_t before = reserved_bytes(device_);
        at::Generator scratch = gen.clone();  // the warm-up's draws leave the call's stream untouched
        auto pass = [&](at::Generator& g) {
            return rollout_from_prefill(c, w, rot, e->prefill, *e->prefill_cache, *e->cache, e->rin, e->rpm, H, rounded, copies, g,
                                        nullptr);
        };
        try {
            capture_graph(e->graph, device_, [&] { (void)pass(scratch); }, [&] { e->out = pass(gen); }, &gen);
        } catch (...) {
            // A failed capture (out of memory, say) leaves no entry behind: the next call of the shape starts afresh.
            std::lock_guard<std::mutex> lock(mu_);
            entries_.remove(e);
            throw;
        }
        e->captured = true;
        e->bytes = reserved_bytes(device_) - before;
    }
    std::vector<at::Tensor> out;
    const int64_t calls = rounded / c.patch_size - 1;  // decode calls a replay makes (the prefill's was counted)
    for (int64_t k = 0; k < batches; ++k) {
        run.check();
        e->graph.replay();
        out.push_back(e->out.clone());
        run.advance(static_cast<uint64_t>(calls));
    }
    return out;
}

}  // namespace cn::toto
