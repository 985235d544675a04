// Kronos decode plans and their executors (kronos_decode.h): per step the reference's full recompute, the KV-cached
// step, or replays of captured graphs, with the same generator calls in the same order on every plan of a path.
#include "core/models/kronos/kronos_decode.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>

#include "core/common/status.h"

namespace cn::kronos {
namespace {

using Tokens = std::pair<at::Tensor, at::Tensor>;  // the step's draws (s1, s2) [N, 1]

// The window slides during the call: steps from history + 1 - max_context on recompute a full window.
bool slides(const PredictorConfig& cfg, int64_t T0, int64_t P) { return T0 + P - 1 > cfg.max_context; }

// Graph mode captures the cached step, valid while the window does not slide; one step needs no graph. The
// step's attention kernel holds up to 8192 cache rows of head dim <= 256 (kernels/kv_cache.h).
bool graphable(const PredictorConfig& cfg, const PredictorWeights& pw, int64_t T0, int64_t P) {
    const int64_t d = cfg.d_model, heads = std::min<int64_t>(cfg.n_heads, pw.dep_heads);
    return T0 + P - 1 <= cfg.max_context && P >= 2 && cfg.max_context <= 8192 && d / heads <= 256;
}

// Whether a sliding entry is captured for `rows` batch rows (its pool holds a whole window's activations).
bool slide_fits(const PredictorConfig& cfg, int64_t rows) { return rows * cfg.max_context <= KronosGraphs::kMaxSlidingTokens; }

at::Generator make_generator(c10::Device device, uint64_t seed) {
    if (device.is_cuda()) {
        at::Generator g = cuda_generator(device);
        g.set_current_seed(seed);
        return g;
    }
    return at::make_generator<at::CPUGeneratorImpl>(seed);
}

// What the executors of one batch read.
struct Exec {
    const KronosNets& nets;
    const DecodeOptions& opt;
    const Sampling& s;
    at::Generator& gen;
    const KronosGraphs::Lock* lock;  // graph mode
    const at::Tensor& stamp;         // [N, T0 + P, 5]
    int64_t T0, P;

    int64_t window() const { return nets.cfg.pred.max_context; }

    // The draw of each step: the reference's ops in eager mode, the kernels' (as graph mode's) otherwise.
    at::Tensor sample(const at::Tensor& logits) const {
        return opt.path == Path::kKernels ? sample_kernels(logits, s.temperature, s.top_k, s.top_p, gen)
                                          : sample_from_logits(logits, s.temperature, s.top_k, s.top_p, gen);
    }

    // The reference's step: decode_s1 and decode_s2 over the window [start, cur), the last row's draws.
    Tokens recompute(const DecodedBatch& t, int64_t start, int64_t cur) const {
        const at::Tensor in1 = t.all1.slice(1, start, cur).contiguous(), in2 = t.all2.slice(1, start, cur).contiguous();
        const at::Tensor st = stamp.slice(1, start, cur).contiguous();
        auto [logits1, context] = decode_s1(nets.cfg.pred, nets.pred, in1, in2, st, opt.path);
        const at::Tensor s1 = sample(logits1.select(1, -1).contiguous());
        const at::Tensor logits2 = decode_s2(nets.cfg.pred, nets.pred, context, s1).select(1, -1);
        const at::Tensor s2 = sample(logits2.contiguous());
        return {s1, s2};
    }

    // The cached step while the window has not slid (its start stays 0, so positions are fixed): tokens
    // [cache.len, cur) are new to the cache (the whole history on the first step).
    Tokens cached(const DecodedBatch& t, KronosCache& cache, int64_t cur) const {
        const int64_t from = cache.len;
        auto [logits1, last] =
            decode_s1_cached(nets.cfg.pred, nets.pred, t.all1.slice(1, from, cur).contiguous(), t.all2.slice(1, from, cur).contiguous(),
                             stamp.slice(1, from, cur).contiguous(), cache, window(), opt.path);
        const at::Tensor s1 = sample(logits1);
        const at::Tensor s2 = sample(decode_s2_cached(nets.cfg.pred, nets.pred, last, s1, cache));
        return {s1, s2};
    }
};

// The history's tokens and room for the forecast's: all1/all2 [N, T0 + P].
DecodedBatch encode(const Exec& e, const at::Tensor& x) {
    auto [tok1, tok2] = tokenizer_encode(e.nets.cfg.tok, e.nets.tok, x, e.opt.path);
    const int64_t N = tok1.size(0);
    DecodedBatch t;
    t.all1 = at::cat({tok1, at::empty({N, e.P}, tok1.options())}, 1);
    t.all2 = at::cat({tok2, at::empty({N, e.P}, tok2.options())}, 1);
    return t;
}

// The step's draws into column `cur`.
void put(DecodedBatch& t, int64_t cur, const Tokens& s) {
    t.all1.select(1, cur).copy_(s.first.squeeze(-1));
    t.all2.select(1, cur).copy_(s.second.squeeze(-1));
}

// The decoded candles of the last window (the tokens of its last max_context positions).
void decode_window(const Exec& e, DecodedBatch& t) {
    const int64_t total = e.T0 + e.P, ws = std::max<int64_t>(0, total - e.window());
    t.z = tokenizer_decode(e.nets.cfg.tok, e.nets.tok, t.all1.slice(1, ws, total).contiguous(), t.all2.slice(1, ws, total).contiguous(),
                           e.opt.path);
}

// ---- the executors, one per plan -------------------------------------------------------------------------

DecodedBatch decode_recompute(const Exec& e, const at::Tensor& x, RunContext& run) {
    DecodedBatch t = encode(e, x);
    for (int64_t i = 0; i < e.P; ++i) {
        run.check();
        const int64_t cur = e.T0 + i, start = std::max<int64_t>(0, cur - e.window());
        put(t, cur, e.recompute(t, start, cur));
        run.advance(1);
    }
    decode_window(e, t);
    return t;
}

DecodedBatch decode_cached(const Exec& e, const at::Tensor& x, RunContext& run) {
    DecodedBatch t = encode(e, x);
    KronosCache cache;
    for (int64_t i = 0; i < e.P; ++i) {
        run.check();
        const int64_t cur = e.T0 + i, start = std::max<int64_t>(0, cur - e.window());
        put(t, cur, start == 0 ? e.cached(t, cache, cur) : e.recompute(t, start, cur));
        run.advance(1);
    }
    decode_window(e, t);
    return t;
}

DecodedBatch decode_sliding(const Exec& e, KronosGraphs::Sliding& slide, const at::Tensor& x, RunContext& run) {
    DecodedBatch t = encode(e, x);
    KronosCache cache;
    for (int64_t i = 0; i < e.P; ++i) {
        run.check();
        const int64_t cur = e.T0 + i, start = std::max<int64_t>(0, cur - e.window());
        if (start == 0) {
            put(t, cur, e.cached(t, cache, cur));
        } else {
            // A full window (cur - start == max_context rows): the captured recompute on the window's buffers; its
            // outputs are copied into all1/all2 before the next replay.
            put(t, cur,
                e.opt.graphs->replay_sliding(*e.lock, slide, t.all1.slice(1, start, cur), t.all2.slice(1, start, cur),
                                             e.stamp.slice(1, start, cur)));
        }
        run.advance(1);
    }
    decode_window(e, t);
    return t;
}

DecodedBatch decode_graph_step(const Exec& e, KronosGraphs::Step& step, const at::Tensor& x, RunContext& run) {
    DecodedBatch t = encode(e, x);
    // The first step as the cached path's, on the entry's static cache: the prefill fills it, the replays extend it.
    KronosCache cache = e.opt.graphs->static_cache(*e.lock, step);
    run.check();
    put(t, e.T0, e.cached(t, cache, e.T0));
    run.advance(1);
    // Steps 1..P-1: replays of the captured step; the inputs are the history so far and the stamps.
    e.opt.graphs->replay_steps(*e.lock, step, e.stamp, e.T0, e.P, run, t.all1, t.all2);
    decode_window(e, t);
    return t;
}

DecodedBatch decode_graph_ends(const Exec& e, KronosGraphs::Step& step, KronosGraphs::Ends& ends, const at::Tensor& x, RunContext& run) {
    KronosGraphs::CallTokens c = e.opt.graphs->replay_call(*e.lock, step, ends, x, e.stamp, e.T0, e.P, run);
    return {std::move(c.all1), std::move(c.all2), std::move(c.z)};
}

}  // namespace

DecodeOptions decode_options(cn_mode mode, const PredictorWeights& pw, KronosGraphs* graphs) {
    DecodeOptions o;
    // Fused and graph modes on CUDA run the sequence passes on the kernels (fused weights); eager mode, and every
    // mode on CPU, the reference's ops.
    o.path = mode != CN_MODE_EAGER && !pw.blocks.empty() && pw.blocks[0].qkv.w.defined() ? Path::kKernels : Path::kReference;
    // Cached decoding (fused and graph modes) while the window has not slid; the reference's full recompute
    // otherwise, and always in eager mode.
    o.use_cache = mode == CN_MODE_FUSED || mode == CN_MODE_GRAPH;
    o.graphs = mode == CN_MODE_GRAPH ? graphs : nullptr;
    return o;
}

DecodeCall::DecodeCall(const KronosNets& nets, const DecodeOptions& opt, const Sampling& sampling, const std::vector<BatchShape>& batches,
                       int64_t horizon, uint64_t seed, c10::Device device)
    : nets_(nets), opt_(opt), sampling_(sampling), horizon_(horizon) {
    if (!opt.graphs) {
        gen_ = make_generator(device, seed);
        return;
    }
    // Serialised: the graphs' static buffers and generator are shared. Capture every entry this call needs before
    // seeding, so captures never consume draws of the seeded sequence; a call needing more entries than are kept
    // at once runs the cached path instead (a re-capture would draw from the sequence).
    KronosGraphs& g = *opt.graphs;
    lock_.emplace(g.lock());
    const PredictorConfig& cfg = nets.cfg.pred;
    const int64_t P = horizon;
    const Sampling& s = sampling;
    std::set<int64_t> rows, slide_rows;
    for (const BatchShape& b : batches) {
        if (graphable(cfg, nets.pred, b.history, P)) rows.insert(b.rows);
        if (slides(cfg, b.history, P) && slide_fits(cfg, b.rows)) slide_rows.insert(b.rows);
    }
    use_sliding_ = g.fits_sliding(slide_rows.size());
    if (use_sliding_) {
        for (int64_t n : slide_rows) g.sliding(*lock_, n, s.temperature, s.top_k, s.top_p);
    }
    use_steps_ = g.fits(rows.size());
    if (use_steps_) {
        std::map<int64_t, std::set<int64_t>> histories;  // rows -> the history lengths of their batches
        for (const BatchShape& b : batches) {
            if (graphable(cfg, nets.pred, b.history, P)) histories[b.rows].insert(b.history);
        }
        use_ends_ = true;
        for (const auto& [n, t0s] : histories) use_ends_ = use_ends_ && t0s.size() <= KronosGraphs::kMaxEnds;
        for (const auto& [n, t0s] : histories) {
            KronosGraphs::Step& e = g.step(*lock_, n, s.temperature, s.top_k, s.top_p);
            for (int64_t T0 : t0s) {
                if (use_ends_) g.ends(*lock_, e, T0, P);
            }
        }
    }
    gen_ = g.generator();
    std::lock_guard<std::mutex> glock(gen_.mutex());
    gen_.set_current_seed(seed);
}

DecodePlan DecodeCall::plan(int64_t T0, int64_t N) {
    const PredictorConfig& cfg = nets_.cfg.pred;
    const int64_t P = horizon_;
    const Sampling& s = sampling_;
    KronosGraphs* g = opt_.graphs;
    DecodePlan p;
    if (g && use_steps_ && graphable(cfg, nets_.pred, T0, P)) {
        p.step = &g->step(*lock_, N, s.temperature, s.top_k, s.top_p);
        p.ends = use_ends_ ? KronosGraphs::find_ends(*lock_, *p.step, T0, P) : nullptr;
        p.kind = p.ends ? DecodePlan::Kind::kGraphEnds : DecodePlan::Kind::kGraphStep;
    } else if (g && use_sliding_ && slides(cfg, T0, P) && slide_fits(cfg, N)) {
        p.sliding = &g->sliding(*lock_, N, s.temperature, s.top_k, s.top_p);
        p.kind = DecodePlan::Kind::kSliding;
    } else {
        p.kind = opt_.use_cache ? DecodePlan::Kind::kCached : DecodePlan::Kind::kRecompute;
    }
    return p;
}

DecodedBatch DecodeCall::run(const at::Tensor& x, const at::Tensor& stamp, RunContext& run) {
    const int64_t N = x.size(0), T0 = x.size(1);
    const DecodePlan p = plan(T0, N);
    const Exec e{nets_, opt_, sampling_, gen_, lock_ ? &*lock_ : nullptr, stamp, T0, horizon_};
    switch (p.kind) {
        case DecodePlan::Kind::kRecompute: return decode_recompute(e, x, run);
        case DecodePlan::Kind::kCached: return decode_cached(e, x, run);
        case DecodePlan::Kind::kSliding: return decode_sliding(e, *p.sliding, x, run);
        case DecodePlan::Kind::kGraphStep: return decode_graph_step(e, *p.step, x, run);
        case DecodePlan::Kind::kGraphEnds: return decode_graph_ends(e, *p.step, *p.ends, x, run);
    }
    fail(Status::kInternal, "Kronos: unknown decode plan");
}

}  // namespace cn::kronos
