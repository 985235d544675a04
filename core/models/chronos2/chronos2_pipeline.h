// Chronos2Pipeline semantics (chronos-forecasting 2.3.x predict / predict_quantiles) over the forward
// pass: tasks and their rows, batching, context truncation and left padding, known future covariates,
// the autoregressive rollout past the native horizon, and quantile selection or interpolation.
#pragma once

#include <cstddef>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "core/models/chronos2/chronos2_config.h"
#include "core/models/chronos2/chronos2_forward.h"
#include "core/runtime/requests.h"
#include "core/runtime/run_context.h"

namespace cn::chronos2 {

class GraphCache;
}  // namespace cn::chronos2
namespace cn {
class StreamLanes;
}  // namespace cn
namespace cn::chronos2 {

struct PipelineOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    int64_t batch_rows = 256;  // the reference's default batch_size: rows (targets + covariates) per batch
    int64_t max_horizon = 0;
    bool fused = false;            // fused mode: forward_fused (cutenative's kernels) instead of forward
    GraphCache* graphs = nullptr;  // graph and fused modes on CUDA: forward passes replay captured CUDA graphs
    // With graphs: two or more streams on which batches run side by side, queued on the lanes in turn. In a call of
    // fewer batches than lanes, a batch of single-row tasks without a rollout is split into min(rows / 128, lanes)
    // pieces (whole tasks, every piece keeping the batch's context length, so each series sees exactly what it would
    // in the whole batch); a call of one piece stays on the caller's stream. Null: one stream, whole batches.
    const StreamLanes* lanes = nullptr;
};

// Output shape of a request (validates its structure: horizon set, covariates attached to series).
ForecastShape forecast_shape(const Chronos2Config& cfg, const PipelineOptions& opt, const ForecastRequest& req);

// Runs the request; writes [series][quantile][horizon] floats into out (out_count >= shape.n_values()).
// Throws cn::Error(kInvalidArgument) naming the field for bad values, kCancelled / kDeadlineExceeded
// when the run context says so (checked between batches and rollout steps).
void forecast(const Chronos2Config& cfg, const Chronos2Weights& w, const PipelineOptions& opt, const ForecastRequest& req, RunContext& run,
              float* out, size_t out_count);

}  // namespace cn::chronos2
