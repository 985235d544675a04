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
// Calls are serialised: the entries own static buffers and share the model's generator.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include <ATen/core/Generator.h>
#include <ATen/cuda/CUDAGraph.h>

#include "core/models/kronos/kronos_forward.h"

namespace cn::kronos {

class KronosGraphs {
public:
    KronosGraphs(const PredictorConfig& cfg, const PredictorWeights& w, const TokenizerConfig& tcfg, const TokenizerWeights& tw,
                 c10::Device device);
    ~KronosGraphs();
    KronosGraphs(const KronosGraphs&) = delete;
    KronosGraphs& operator=(const KronosGraphs&) = delete;

    struct Ends {  // the prologue and epilogue of one (T0, P), on the entry's static state
        // Horizons up to kMaxWholeSteps: one graph for the whole call (prologue, P - 1 steps, epilogue), one replay;
        // longer ones: the prologue and epilogue graphs around the step graph's replays.
        at::cuda::CUDAGraph whole, prologue, epilogue;
        bool has_whole = false;
        at::Tensor x;  // input: normalised candles [N, T0, 6] (model dtype)
        at::Tensor z;  // output: decoded candles of the last window [N, Lw, 6] (model dtype)
        uint64_t last_used = 0, bytes = 0;
    };
    struct Entry {
        at::cuda::CUDAGraph graph;
        KronosStepState st;
        std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Ends>> ends;  // by (T0, P)
        double temperature = 1;
        int64_t top_k = 0;
        double top_p = 1;
        uint64_t last_used = 0;
        uint64_t bytes = 0;  // the step graph's and the ends'
    };
    // Ends kept per entry (LRU beyond); a call needing more for one entry replays only the step.
    static constexpr size_t kMaxEnds = 4;
    // Horizon up to which a call is captured as one graph (its pool holds every step's activations).
    static constexpr int64_t kMaxWholeSteps = 64;
    struct Sliding {  // the full-window step: inputs win1/win2 [N, M], wstamp [N, M, 5]; outputs out1/out2 [N, 1]
        at::cuda::CUDAGraph graph;
        at::Tensor win1, win2, wstamp, out1, out2;
        uint64_t last_used = 0, bytes = 0;
    };
    // Token rows (batch rows x max_context) up to which a sliding entry is captured (its pool holds a whole
    // window's activations); larger batches run the full recompute eagerly.
    static constexpr int64_t kMaxSlidingTokens = 32768;
    bool fits_sliding(size_t distinct_keys) const { return distinct_keys <= kMaxEntries; }
    // The sliding entry for `rows` batch rows and these sampling parameters, captured on first use (LRU of
    // kMaxEntries). Caller holds mu().
    Sliding& sliding(int64_t rows, double temperature, int64_t top_k, double top_p);
    // Entries kept (each holds static caches of max_context rows for its batch shape); the least recently used
    // one is evicted beyond that. A call that would need more distinct entries runs without graphs.
    static constexpr size_t kMaxEntries = 8;
    // Whether `get` for these keys would capture nothing it evicts during the call (all fit at once).
    bool fits(size_t distinct_keys) const { return distinct_keys <= kMaxEntries; }
    // The entry for `rows` batch rows and these sampling parameters, captured on first use. Caller holds mu().
    Entry& get(int64_t rows, double temperature, int64_t top_k, double top_p);
    // The entry's ends for history T0 and horizon P, captured on first use. Caller holds mu().
    Ends& ends(Entry& e, int64_t T0, int64_t P);
    // The ends already captured for (T0, P), or null.
    static Ends* find_ends(Entry& e, int64_t T0, int64_t P);
    // The generator every captured step draws from (registered with each graph); seed it per call.
    at::Generator& generator() { return gen_; }
    std::mutex& mu() { return mu_; }
    uint64_t pool_bytes() const { return pool_bytes_.load(); }

private:
    using Key = std::tuple<int64_t, double, int64_t, double>;
    const PredictorConfig& cfg_;
    const PredictorWeights& w_;
    const TokenizerConfig& tcfg_;
    const TokenizerWeights& tw_;
    c10::Device device_;
    at::Generator gen_;
    std::mutex mu_;
    std::map<Key, std::unique_ptr<Entry>> entries_;
    std::map<Key, std::unique_ptr<Sliding>> sliding_;
    uint64_t tick_ = 0;
    std::atomic<uint64_t> pool_bytes_{0};  // read by cn_model_get_info without the lock
};

}  // namespace cn::kronos
