#include "core/models/kronos/kronos_graphs.h"

#include <algorithm>

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>

#include "core/common/status.h"
#include "core/runtime/cuda_graph.h"

namespace cn::kronos {
namespace {

// Makes room in an LRU map of items with `last_used` and `bytes` (entries, ends, sliding entries): when `limit`
// are held, erases the least recently used one. Returns the bytes it held (0 when nothing was erased).
template <class Map>
uint64_t evict_lru(Map& m, size_t limit) {
    if (m.empty() || m.size() < limit) return 0;
    const auto victim = std::min_element(m.begin(), m.end(), [](const auto& a, const auto& b) {
        return a.second->last_used < b.second->last_used;
    });
    const uint64_t bytes = victim->second->bytes;
    m.erase(victim);
    return bytes;
}

// The item held under `key`, marked as used now; null when there is none (the caller captures it).
template <class Map, class Key>
auto touch(Map& m, const Key& key, uint64_t& tick) -> decltype(m.begin()->second.get()) {
    auto it = m.find(key);
    if (it == m.end()) return nullptr;
    it->second->last_used = ++tick;
    return it->second.get();
}

}  // namespace

KronosGraphs::KronosGraphs(const PredictorConfig& cfg, const PredictorWeights& w, const TokenizerConfig& tcfg,
                           const TokenizerWeights& tw, c10::Device device)
    : cfg_(cfg), w_(w), tcfg_(tcfg), tw_(tw), device_(device), gen_(at::cuda::detail::createCUDAGenerator(device.index())) {
    if (!device.is_cuda()) fail(Status::kUnsupported, "graph mode needs a CUDA device");
}

KronosGraphs::~KronosGraphs() = default;

KronosGraphs::Entry& KronosGraphs::get(int64_t N, double temperature, int64_t top_k, double top_p) {
    const Key key{N, temperature, top_k, top_p};
    if (Entry* hit = touch(entries_, key, tick_)) return *hit;
    pool_bytes_ -= evict_lru(entries_, kMaxEntries);
    c10::cuda::CUDAGuard guard(device_);
    const int64_t before = reserved_bytes(device_);
    const int64_t M = cfg_.max_context, d = cfg_.d_model;
    auto e = std::make_unique<Entry>();
    e->temperature = temperature;
    e->top_k = top_k;
    e->top_p = top_p;
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

KronosGraphs::Ends* KronosGraphs::find_ends(Entry& e, int64_t T0, int64_t P) {
    auto it = e.ends.find({T0, P});
    return it == e.ends.end() ? nullptr : it->second.get();
}

KronosGraphs::Ends& KronosGraphs::ends(Entry& e, int64_t T0, int64_t P) {
    if (Ends* hit = touch(e.ends, std::make_pair(T0, P), tick_)) return *hit;
    const uint64_t freed = evict_lru(e.ends, kMaxEnds);
    e.bytes -= freed;
    pool_bytes_ -= freed;
    c10::cuda::CUDAGuard guard(device_);
    const int64_t before = reserved_bytes(device_);
    const int64_t M = cfg_.max_context, N = e.st.hist1.size(0), total = T0 + P, ws = std::max<int64_t>(0, total - M);
    auto en = std::make_unique<Ends>();
    en->x = at::zeros({N, T0, 6}, at::TensorOptions().dtype(w_.emb_s1.scalar_type()).device(device_));
    KronosStepState& st = e.st;
    // Prologue: tokens of the history, the cache prefilled with them, the first step's s1 and s2 drawn exactly as
    // the cached path draws them, and pos at T0 for the step graph.
    auto prologue = [&] {
        auto [t1, t2] = tokenizer_encode(tcfg_, tw_, en->x, Path::kKernels);
        st.hist1.narrow(1, 0, T0).copy_(t1);
        st.hist2.narrow(1, 0, T0).copy_(t2);
        KronosCache c = st.cache;
        c.len = 0;
        auto [logits1, last] = decode_s1_cached(cfg_, w_, t1, t2, st.stamps.narrow(1, 0, T0), c, M, Path::kKernels);
        const at::Tensor s1 = sample_kernels(logits1, e.temperature, e.top_k, e.top_p, gen_);
        const at::Tensor s2 = sample_kernels(decode_s2_cached(cfg_, w_, last, s1, c), e.temperature, e.top_k, e.top_p, gen_);
        st.hist1.narrow(1, T0, 1).copy_(s1);
        st.hist2.narrow(1, T0, 1).copy_(s2);
        st.pos.fill_(T0);
    };
    en->z = at::zeros({N, total - ws, tcfg_.d_in}, en->x.options());
    auto epilogue = [&] {
        en->z.copy_(tokenizer_decode(tcfg_, tw_, st.hist1.narrow(1, ws, total - ws).contiguous(),
                                     st.hist2.narrow(1, ws, total - ws).contiguous(), Path::kKernels));
    };
    if (P <= kMaxWholeSteps) {
        auto whole = [&] {
            prologue();
            for (int64_t j = 1; j < P; ++j) decode_step_static(cfg_, w_, st, e.temperature, e.top_k, e.top_p, gen_);
            epilogue();
        };
        capture_graph(en->whole, device_, whole, whole, &gen_);
        en->has_whole = true;
    } else {
        capture_graph(en->prologue, device_, prologue, prologue, &gen_);
        capture_graph(en->epilogue, device_, epilogue, epilogue);
    }
    en->bytes = static_cast<uint64_t>(std::max<int64_t>(0, reserved_bytes(device_) - before));
    e.bytes += en->bytes;
    pool_bytes_ += en->bytes;
    en->last_used = ++tick_;
    auto& slot = e.ends[{T0, P}];
    slot = std::move(en);
    return *slot;
}

KronosGraphs::Sliding& KronosGraphs::sliding(int64_t N, double temperature, int64_t top_k, double top_p) {
    const Key key{N, temperature, top_k, top_p};
    if (Sliding* hit = touch(sliding_, key, tick_)) return *hit;
    pool_bytes_ -= evict_lru(sliding_, kMaxEntries);
    c10::cuda::CUDAGuard guard(device_);
    const int64_t before = reserved_bytes(device_);
    const int64_t M = cfg_.max_context;
    auto sl = std::make_unique<Sliding>();
    const auto i64 = at::TensorOptions().dtype(at::kLong).device(device_);
    sl->win1 = at::zeros({N, M}, i64);
    sl->win2 = at::zeros({N, M}, i64);
    sl->wstamp = at::zeros({N, M, 5}, i64.dtype(at::kFloat));
    sl->out1 = at::zeros({N, 1}, i64);
    sl->out2 = at::zeros({N, 1}, i64);
    Sliding& r = *sl;
    auto pass = [&] {  // the full recompute on the kernels path (the eager path's passes and generator calls)
        auto [logits1, context] = decode_s1(cfg_, w_, r.win1, r.win2, r.wstamp, Path::kKernels);
        const at::Tensor s1 = sample_kernels(logits1.select(1, -1).contiguous(), temperature, top_k, top_p, gen_);
        const at::Tensor s2 =
            sample_kernels(decode_s2(cfg_, w_, context, s1).select(1, -1).contiguous(), temperature, top_k, top_p, gen_);
        r.out1.copy_(s1);
        r.out2.copy_(s2);
    };
    capture_graph(sl->graph, device_, pass, pass, &gen_);
    sl->bytes = static_cast<uint64_t>(std::max<int64_t>(0, reserved_bytes(device_) - before));
    pool_bytes_ += sl->bytes;
    sl->last_used = ++tick_;
    auto& slot = sliding_[key];
    slot = std::move(sl);
    return *slot;
}

}  // namespace cn::kronos
