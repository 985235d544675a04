// Graph mode for Kronos (CUDA): the cached decode step (decode_step_static) captured once per batch shape and
// sampling setting, then replayed once per forecast step with no host round trip; tokens accumulate in the
// entry's static history and are copied out after the last replay (no output is ever read from a buffer a later
// replay overwrites). Per (history length, horizon) an entry also holds the "ends": the prologue (tokenizer
// encode, the prefill of the cache, the first step's draws) and the epilogue (tokenizer decode), so a call is one
// prologue, horizon - 1 steps and one epilogue, all replays; up to kMaxWholeSteps steps the whole call is one
// graph instead (one replay: no host round trip or graph launch between the steps). Used while the window does not
// slide (history + horizon - 1 <= max_context). Once it slides, every step is the reference's full recompute
// of a max_context window: that pass (decode_s1, decode_s2 and both draws on static window buffers) is
// captured per batch shape and sampling setting too ("sliding" entries) and replayed once per such step.
// Calls are serialised: the entries own static buffers and share the model's generator. The three kinds of
// entries are LRU graph caches (core/runtime/graph_cache.h) sharing one pool; the ends are a cache nested in
// their step entry.
//
// Declared in every build: CUDA builds compile kronos_graphs.cpp, the others kronos_graphs_stub.cpp, whose
// functions fail with kUnsupported (a CUDA-less build never has a CUDA model, so nothing reaches them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "core/models/kronos/kronos_forward.h"
#include "core/runtime/graph_cache.h"
#include "core/runtime/run_context.h"

namespace cn::kronos {

// A new CUDA generator of `device` (Philox): graph mode's, and every eager or fused call's draws on CUDA models.
at::Generator cuda_generator(c10::Device device);

class KronosGraphs {
public:
    // Entries kept per kind (each step entry holds static caches of max_context rows for its batch shape); the
    // least recently used one is evicted beyond that. A call that would need more distinct entries of a kind runs
    // without them.
    static constexpr size_t kMaxEntries = 8;
    // Ends kept per step entry (LRU beyond); a call needing more for one entry replays only the step.
    static constexpr size_t kMaxEnds = 4;
    // Horizon up to which a call is captured as one graph (its pool holds every step's activations).
    static constexpr int64_t kMaxWholeSteps = 64;
    // Token rows (batch rows x max_context) up to which a sliding entry is captured (its pool holds a whole
    // window's activations); larger batches run the full recompute eagerly.
    static constexpr int64_t kMaxSlidingTokens = 32768;

    struct Step;     // the captured cached step on its static state, and its ends
    struct Ends;     // the prologue and epilogue (or the whole call) of one (T0, P), on a step entry's state
    struct Sliding;  // the captured full-window step on its window buffers
    using Lock = GraphPool::Lock;

    // The graphs of a CUDA model (kUnsupported in a CUDA-less build, kronos_graphs_stub.cpp).
    static std::unique_ptr<KronosGraphs> create(const PredictorConfig& cfg, const PredictorWeights& w, const TokenizerConfig& tcfg,
                                                const TokenizerWeights& tw, c10::Device device);
    KronosGraphs(const PredictorConfig& cfg, const PredictorWeights& w, const TokenizerConfig& tcfg, const TokenizerWeights& tw,
                 c10::Device device);
    ~KronosGraphs();
    KronosGraphs(const KronosGraphs&) = delete;
    KronosGraphs& operator=(const KronosGraphs&) = delete;

    // Serialises a call: every lookup, capture and replay below takes the lock as proof.
    Lock lock() const { return pool_.lock(); }
    // Whether `distinct_keys` step (sliding) entries are kept at once: get them all before seeding, and none is
    // evicted and re-captured during the call (a re-capture would draw from the seeded sequence).
    bool fits(size_t distinct_keys) const { return distinct_keys <= kMaxEntries; }
    bool fits_sliding(size_t distinct_keys) const { return distinct_keys <= kMaxEntries; }
    // The step entry for `rows` batch rows and these sampling parameters, captured on first use.
    Step& step(const Lock& lock, int64_t rows, double temperature, int64_t top_k, double top_p);
    // The entry's ends for history T0 and horizon P, captured on first use (LRU of kMaxEnds per entry).
    Ends& ends(const Lock& lock, Step& e, int64_t T0, int64_t P);
    // The ends already captured for (T0, P), or null.
    static Ends* find_ends(const Lock& lock, Step& e, int64_t T0, int64_t P);
    // The sliding entry for `rows` batch rows and these sampling parameters, captured on first use.
    Sliding& sliding(const Lock& lock, int64_t rows, double temperature, int64_t top_k, double top_p);

    // The generator every captured graph draws from (registered with each graph); seed it per call.
    at::Generator& generator() { return gen_; }
    uint64_t pool_bytes() const { return pool_.bytes(); }

    // Replays, each on an entry the call looked up under `lock`:
    // The whole decode of a batch from its ends: x [N, T0, 6] normalised candles, stamp [N, T0 + P, 5]; the
    // prologue, P - 1 steps and the epilogue (or the whole-call graph). Returns the tokens [N, T0 + P] of history
    // and forecast and the decoded candles of the last window [N, Lw, 6].
    struct CallTokens {
        at::Tensor all1, all2, z;
    };
    CallTokens replay_call(const Lock& lock, Step& e, Ends& ends, const at::Tensor& x, const at::Tensor& stamp, int64_t T0, int64_t P,
                           RunContext& run);
    // The entry's static cache, emptied: the cached path's first step (the prefill) fills it for the replays.
    KronosCache static_cache(const Lock& lock, Step& e);
    // Steps 1 .. P - 1 as replays after the first step was drawn into all1/all2 [N, T0 + P] (column T0): the
    // inputs are the history so far and the stamps; the drawn tokens go to columns T0 + 1 ...
    void replay_steps(const Lock& lock, Step& e, const at::Tensor& stamp, int64_t T0, int64_t P, RunContext& run, at::Tensor& all1,
                      at::Tensor& all2);
    // One full-window step on the tokens win1/win2 [N, M] and stamps [N, M, 5]: the drawn (s1, s2) [N, 1], views of
    // the entry's outputs (read them before the next replay).
    std::pair<at::Tensor, at::Tensor> replay_sliding(const Lock& lock, Sliding& s, const at::Tensor& win1, const at::Tensor& win2,
                                                     const at::Tensor& wstamp);

private:
    using Key = std::tuple<int64_t, double, int64_t, double>;  // rows, temperature, top_k, top_p
    const PredictorConfig& cfg_;
    const PredictorWeights& w_;
    const TokenizerConfig& tcfg_;
    const TokenizerWeights& tw_;
    c10::Device device_;
    at::Generator gen_;
    GraphPool pool_;  // the lock of every call, and the bytes of all three caches
    LruGraphCache<Key, Step> steps_;
    LruGraphCache<Key, Sliding> sliding_;
};

}  // namespace cn::kronos
