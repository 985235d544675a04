// Toto graph mode (CUDA): after a batch of tasks' fused prefill, one sample batch's rollout (the sample copies'
// mixture and cache from the prefill, the draws, every decode step; rollout_from_prefill) is captured as one CUDA
// graph on static inputs and replayed once per sample batch. Entries are kept per shape (the batch's rows,
// variates, history, horizon and samples per call; at most kMaxEntries, least recently used evicted) and serve
// later calls of the same shape, which copy their prefill into the entry's static inputs. A replay runs fused
// mode's kernels on fused mode's draws (the generator is registered with the graph, and the capture's warm-up
// draws from a copy of it): graph mode's forecasts are fused mode's, bit for bit. CUDA builds only; elsewhere
// create() fails with kUnsupported (toto_graphs_stub.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "core/models/toto/toto_config.h"
#include "core/models/toto/toto_forward.h"
#include "core/models/toto/toto_weights.h"
#include "core/runtime/run_context.h"

namespace cn::toto {

class TotoGraphs {
public:
    static constexpr size_t kMaxEntries = 2;  // each holds a sample batch's activations in its pool

    // `gen`: the generator every graph is registered with (a fresh one of the device, private to these graphs).
    static std::unique_ptr<TotoGraphs> create(c10::Device device, at::Generator gen);
    ~TotoGraphs();

    // The sample batches' horizon paths ([R, V, H] each) after the prefill (`prefill`, `prefill_cache`: B x V rows;
    // rin / rpm: the inputs repeated to R = copies x B rows), `batches` replays; `run` is checked before each
    // replay and advanced by its model calls.
    std::vector<at::Tensor> run(const TotoConfig& c, const TotoWeights& w, const Rotary& rot, const Mixture& prefill,
                                const KvCache& prefill_cache, const at::Tensor& rin, const at::Tensor& rpm, int64_t H, int64_t rounded,
                                int64_t copies, int64_t batches, at::Generator& gen, RunContext& run);

    // Device bytes the entries' graph pools hold (cn_model_info's graph_pool_bytes).
    uint64_t pool_bytes() const;

    // A graph-mode forecast holds the lock for its whole call and draws from generator(), seeded by the call: every
    // graph is registered with this one generator, so a call's draws continue across its batches of tasks as one
    // stream, as fused mode's do; calls take turns.
    std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(call_mu_); }
    at::Generator& generator() { return gen_; }

private:
    struct Entry;
    TotoGraphs(c10::Device device, at::Generator gen) : device_(device), gen_(std::move(gen)) {}
    c10::Device device_;
    at::Generator gen_;
    std::mutex call_mu_;
    mutable std::mutex mu_;
    std::list<std::shared_ptr<Entry>> entries_;  // most recently used first
};

}  // namespace cn::toto
