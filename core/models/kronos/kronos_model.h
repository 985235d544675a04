// Kronos forecasting through cn_forecast (KronosPredictor.predict_batch semantics, eval mode).
//
// Request mapping: one Kronos task is a group of 4, 5 or 6 series, in the order open, high, low, close
// [, volume [, amount]] (all the same length), with Unix-second timestamps (UTC) for history and horizon set
// on the group's first series. With 4 channels, volume and amount are 0 (as the reference fills them); with
// 5, amount = volume * mean(open, high, low, close). Output per series: the mean path over `sample_count`
// sampled paths ([series][1][horizon]); `samples` receives every path ([series][sample][1][horizon]).
// Sampling: temperature, top_k (> 0 disables top_p, as in the reference), top_p, sample_count; the seed of the
// run options seeds the generator right before inference, so on CPU the sampled tokens equal the reference's
// for torch.manual_seed(seed) immediately before KronosPredictor.predict_batch. Tasks with equal history
// lengths run as one batch (the reference's predict_batch); batches run in order of first appearance.
// Limits: horizon <= max_context (the reference decodes one window), sample_count <= 4096, tasks x sample_count
// <= 65536 rows per call.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/format/model_config.h"
#include "core/runtime/model.h"

namespace cn::kronos {

// The tokens a forecast sampled, per batch row (row = task * sample_count + sample, tasks in request order of
// their first series) and step: for the tokens-identical parity check against the reference.
struct KronosTrace {
    std::vector<std::vector<int64_t>> s1, s2;  // [row][step]
};

// cn_forecast on a Kronos model, recording the sampled tokens into *trace. kInvalidArgument for other models.
void forecast_traced(Model& model, const ForecastRequest& req, RunContext& run, float* out, size_t out_count, KronosTrace* trace);

std::unique_ptr<Model> load_kronos(const std::string& dir, const format::ModelConfig& config, const ModelOptions& options);

}  // namespace cn::kronos
