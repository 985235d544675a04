// Kronos graph mode on CUDA (kronos_graphs.h): the step, ends and sliding entries, their captures and replays.
#include "core/models/kronos/kronos_graphs.h"

#include <algorithm>
#include <memory>

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>

#include "core/common/status.h"
#include "core/runtime/cuda_graph.h"

namespace cn::kronos {

struct KronosGraphs::Ends {
    // Horizons up to kMaxWholeSteps: one graph for the whole call (prologue, P - 1 steps, epilogue), one replay;
    // longer ones: the prologue and epilogue graphs around the step graph's replays.
    at::cuda::CUDAGraph whole, prologue, epilogue;
    bool has_whole = false;
    at::Tensor x;  // input: normalised candles [N, T0, 6] (model dtype)
    at::Tensor z;  // output: decoded candles of the last window [N, Lw, 6] (model dtype)
};

struct KronosGraphs::Step {
    explicit Step(GraphPool& pool) : ends(pool, kMaxEnds) {}
    at::cuda::CUDAGraph graph;
    KronosStepState st;
    LruGraphCache<std::pair<int64_t, int64_t>, Ends> ends;  // by (T0, P); their bytes count in the pool too
    double temperature = 1;
    int64_t top_k = 0;
    double top_p = 1;
};

struct KronosGraphs::Sliding {  // the full-window step: inputs win1/win2 [N, M], wstamp [N, M, 5]; outputs out1/out2 [N, 1]
    at::cuda::CUDAGraph graph;
    at::Tensor win1, win2, wstamp, out1, out2;
};

at::Generator cuda_generator(c10::Device device) { return at::cuda::detail::createCUDAGenerator(device.index()); }

std::unique_ptr<KronosGraphs> KronosGraphs::create(const PredictorConfig& cfg, const PredictorWeights& w, const TokenizerConfig& tcfg,
                                                   const TokenizerWeights& tw, c10::Device device) {
    return std::make_unique<KronosGraphs>(cfg, w, tcfg, tw, device);
}

KronosGraphs::KronosGraphs(const PredictorConfig& cfg, const PredictorWeights& w, const TokenizerConfig& tcfg, const TokenizerWeights& tw,
                           c10::Device device)
    : cfg_(cfg),
      w_(w),
      tcfg_(tcfg),
      tw_(tw),
      device_(device),
      gen_(cuda_generator(device)),
      pool_([device] { return reserved_bytes(device); }),
      steps_(pool_, kMaxEntries),
      sliding_(pool_, kMaxEntries) {
    if (!device.is_cuda()) fail(Status::kUnsupported, "graph mode needs a CUDA device");
}

KronosGraphs::~KronosGraphs() = default;

KronosGraphs::Step& KronosGraphs::step(const Lock& lock, int64_t N, double temperature, int64_t top_k, double top_p) {
    return steps_.get(lock, Key{N, temperature, top_k, top_p}, [&] {
        c10::cuda::CUDAGuard guard(device_);
        const int64_t M = cfg_.max_context, d = cfg_.d_model;
        auto e = std::make_unique<Step>(pool_);
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
        return e;
    });
}

KronosGraphs::Ends* KronosGraphs::find_ends(const Lock& lock, Step& e, int64_t T0, int64_t P) { return e.ends.find(lock, {T0, P}); }

KronosGraphs::Ends& KronosGraphs::ends(const Lock& lock, Step& e, int64_t T0, int64_t P) {
    return e.ends.get(lock, {T0, P}, [&] {
        c10::cuda::CUDAGuard guard(device_);
        const int64_t M = cfg_.max_context, N = e.st.hist1.size(0), total = T0 + P, ws = std::max<int64_t>(0, total - M);
        auto en = std::make_unique<Ends>();
        en->x = at::zeros({N, T0, 6}, at::TensorOptions().dtype(w_.emb_s1.scalar_type()).device(device_));
        KronosStepState& st = e.st;
        // Prologue: tokens of the history, the cache prefilled with them, the first step's s1 and s2 drawn exactly
        // as the cached path draws them, and pos at T0 for the step graph.
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
        return en;
    });
}

KronosGraphs::Sliding& KronosGraphs::sliding(const Lock& lock, int64_t N, double temperature, int64_t top_k, double top_p) {
    return sliding_.get(lock, Key{N, temperature, top_k, top_p}, [&] {
        c10::cuda::CUDAGuard guard(device_);
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
        return sl;
    });
}

KronosGraphs::CallTokens KronosGraphs::replay_call(const Lock& lock, Step& e, Ends& ends, const at::Tensor& x, const at::Tensor& stamp,
                                                   int64_t T0, int64_t P, RunContext& run) {
    pool_.check(lock);
    // The whole call as replays: prologue (tokenizer, prefill, first step), P - 1 steps, epilogue.
    KronosStepState& st = e.st;
    st.stamps.narrow(1, 0, T0 + P - 1).copy_(stamp.narrow(1, 0, T0 + P - 1));
    ends.x.copy_(x);
    if (ends.has_whole) {  // short horizons: one replay (cancellation is checked before it)
        run.check();
        ends.whole.replay();
        run.advance(P);
    } else {
        for (int64_t j = 0; j < P; ++j) {
            run.check();
            if (j == 0) {
                ends.prologue.replay();
            } else {
                e.graph.replay();
            }
            run.advance(1);
        }
        ends.epilogue.replay();
    }
    return {st.hist1.narrow(1, 0, T0 + P).clone(), st.hist2.narrow(1, 0, T0 + P).clone(), ends.z.clone()};
}

KronosCache KronosGraphs::static_cache(const Lock& lock, Step& e) {
    pool_.check(lock);
    e.st.cache.len = 0;
    return e.st.cache;
}

void KronosGraphs::replay_steps(const Lock& lock, Step& e, const at::Tensor& stamp, int64_t T0, int64_t P, RunContext& run,
                                at::Tensor& all1, at::Tensor& all2) {
    pool_.check(lock);
    KronosStepState& st = e.st;
    st.stamps.narrow(1, 0, T0 + P - 1).copy_(stamp.narrow(1, 0, T0 + P - 1));
    st.hist1.narrow(1, 0, T0 + 1).copy_(all1.narrow(1, 0, T0 + 1));
    st.hist2.narrow(1, 0, T0 + 1).copy_(all2.narrow(1, 0, T0 + 1));
    st.pos.fill_(T0);
    for (int64_t j = 1; j < P; ++j) {
        run.check();
        e.graph.replay();
        run.advance(1);
    }
    all1.narrow(1, T0 + 1, P - 1).copy_(st.hist1.narrow(1, T0 + 1, P - 1));
    all2.narrow(1, T0 + 1, P - 1).copy_(st.hist2.narrow(1, T0 + 1, P - 1));
}

std::pair<at::Tensor, at::Tensor> KronosGraphs::replay_sliding(const Lock& lock, Sliding& s, const at::Tensor& win1, const at::Tensor& win2,
                                                               const at::Tensor& wstamp) {
    pool_.check(lock);
    s.win1.copy_(win1);
    s.win2.copy_(win2);
    s.wstamp.copy_(wstamp);
    s.graph.replay();
    return {s.out1, s.out2};
}

}  // namespace cn::kronos
