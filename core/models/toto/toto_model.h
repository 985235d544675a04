// Toto forecasting through cn_forecast (TotoForecaster.forecast semantics, eval mode; toto_pipeline.h).
//
// Request mapping: a task is one multivariate series, the series of one group (a series of group -1 is a
// univariate task); its variates attend to each other in the space-wise layers. Variates of different lengths
// are left-padded to the longest (masked, as the reference's pad_array pads); a NaN is a missing value (a masked
// zero, as a reference caller masks one; the reference itself raises on NaN); Inf is INVALID_ARGUMENT. Output per
// series: the quantiles of its sample paths at the request's levels (default 0.1 .. 0.9; the median is the 0.5
// quantile, linearly interpolated as the reference's Forecast.quantile) and their mean ([series][levels + 1]
// [horizon]); `samples` receives every path ([series][sample][1][horizon]). With mean_rollout, the mixture's
// mean rolled out instead (one output, no samples).
// Sampling: sample_count paths, samples_per_batch of them per model call (0: all), the KV cache on or off; the
// seed of the run options seeds the generator right before the first batch, so on the CPU in fp32 the samples
// equal the reference's after torch.manual_seed(seed) immediately before TotoForecaster.forecast on each batch in
// turn: tasks with as many variates and the same padded history length form one batch (one reference call),
// batches in order of first appearance.
#pragma once

#include <memory>
#include <string>

#include "core/format/model_config.h"
#include "core/models/toto/toto_forward.h"
#include "core/runtime/model.h"

namespace cn::toto {

// cn_forecast on a Toto model, recording the first model call's intermediate values into *trace.
void forecast_traced(Model& model, const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples,
                     size_t samples_count, Trace* trace);

std::unique_ptr<Model> load_toto(const std::string& dir, const format::ModelConfig& config, const ModelOptions& options);

}  // namespace cn::toto
