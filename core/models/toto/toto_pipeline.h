// Toto's forecast around the backbone (toto_forward.h), as TotoForecaster.forecast does it: a request's tasks (a
// group's series are the variates of one multivariate series; a series without a group is a task of its own),
// their checks and padding, batches of tasks the reference would forecast in one call, the autoregressive
// rollout patch by patch (sampled, or the mixture's mean), and the statistics of the sample paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "core/models/toto/toto_config.h"
#include "core/models/toto/toto_forward.h"
#include "core/runtime/requests.h"
#include "core/runtime/run_context.h"

namespace cn::toto {

class TotoGraphs;  // toto_graphs.h

// Request limits, checked before anything proportional to them is allocated.
constexpr int32_t kMaxSamplePaths = 4096;             // sample_count
constexpr int64_t kMaxVariates = 1024;                // series of one task
constexpr int64_t kMaxSteps = int64_t{1} << 16;       // padded history + rounded horizon of a task
constexpr int64_t kMaxCallValues = int64_t{1} << 32;  // one model call's activations; the KV cache's values

// The default quantile levels (and those a request may name: any in (0, 1), ascending).
std::vector<float> default_quantiles();

struct Task {
    std::vector<size_t> series;  // the variates, in request order
    int64_t length = 0;          // the longest variate's history
};

struct Batch {
    int64_t variates = 0, padded = 0;  // V, and the history left-padded to a whole number of patches
    std::vector<size_t> members;       // task indices, in order of first appearance
};

struct Plan {
    std::vector<Task> tasks;
    std::vector<Batch> batches;
    std::vector<float> levels;                                                // quantile levels of the outputs (none for the mean rollout)
    int64_t sample_count = 0, samples_per_batch = 0, rounded = 0, calls = 0;  // calls: eager's model calls
    int64_t patch = 0;
    bool kv_cache = true;
};

// The model calls a forecast makes: eager's, or with the prefill once per series (fused and graph modes) one per
// batch of tasks plus the decode steps of each sample batch (run progress counts them).
int64_t model_calls(const Plan& plan, bool prefill_once);

// The request's tasks, batches and decoding, checked (INVALID_ARGUMENT naming the field); values are checked by
// forecast_batch.
Plan make_plan(const ForecastRequest& req, const TotoConfig& cfg);

// Outputs per series: the quantile levels then the mean ([series][levels + 1][horizon]; the mean rollout: the
// mean alone).
int64_t n_outputs(const Plan& plan);

// What a call needs besides the request.
struct Exec {
    const TotoConfig& cfg;
    const TotoWeights& w;
    const Rotary& rot;
    c10::Device device;
    c10::ScalarType dtype;
    at::Generator& gen;
    RunContext& run;
    Trace* trace = nullptr;  // the model call trace->call of this batch (parity tests)
    // Fused mode: the prefill runs once per series (not once per sample copy) and serves every sample batch; the
    // copies' mixtures and caches are its repetitions; small attentions take three ATen ops (toto_forward.h). The
    // random draws are eager's, in eager's order and shapes.
    bool fused = false;
    // Graph mode (CUDA; fused plus this): the sample batches after the prefill replay a captured graph.
    TotoGraphs* graphs = nullptr;
};

// One sample batch after a fused prefill (B series' mixture and cache): the sample copies' mixture and cache are its
// repetitions (into `cache`, R x V rows), then the rollout from rin / rpm ([R, V, L], the inputs repeated) with
// draws from `gen`; returns the batch's horizon paths [R, V, H]. `run` (nullptr while a graph is captured) is
// checked before each model call and advanced after it. Fused and graph modes run this; graph mode captures it.
at::Tensor rollout_from_prefill(const TotoConfig& c, const TotoWeights& w, const Rotary& rot, const Mixture& prefill,
                                const KvCache& prefill_cache, KvCache& cache, const at::Tensor& rin, const at::Tensor& rpm, int64_t H,
                                int64_t rounded, int64_t copies, at::Generator& gen, RunContext* run);

// Forecasts one batch and writes its series' rows of `out` (and of `samples`, when given).
void forecast_batch(const Exec& x, const ForecastRequest& req, const Plan& plan, const Batch& batch, float* out, float* samples);

}  // namespace cn::toto
