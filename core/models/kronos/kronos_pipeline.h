// KronosPredictor.predict_batch semantics around the decoding (kronos_decode.h): a request's OHLCV tasks and
// their checks, the batches of equal history length, each batch's normalisation (numpy's statistics) and
// calendar stamps, the sampled tokens of a trace, and the de-normalised mean and sample paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "core/models/kronos/kronos_config.h"
#include "core/runtime/requests.h"

namespace cn::kronos {

// Request limits. Every task runs as sample_count rows of one batch: these bound the sample paths of a task, the
// rows of a call, the history of a task (the tokenizer attends over all of it) and the token rows a decode step
// holds (rows x window), which sets the size of every activation.
constexpr int32_t kMaxSamplePaths = 4096;            // sample_count
constexpr int64_t kMaxBatchRows = 65536;             // tasks x sample_count per call
constexpr int64_t kMaxHistoryBars = 1 << 16;         // bars of one task's history
constexpr int64_t kMaxTokenRows = int64_t{1} << 20;  // sum over tasks of sample_count x window
constexpr float kMinTemperature = 1e-6f;             // logits / temperature stays finite above it

struct Task {
    std::vector<size_t> series;  // channel series indices in request order (4..6)
};

// Groups the request's series into OHLCV tasks and checks the request's structure and sampling parameters;
// throws INVALID_ARGUMENT naming the field.
std::vector<Task> make_tasks(const ForecastRequest& req, const PredictorConfig& cfg);

// Values and timestamps of the tasks: finite values, strictly increasing timestamps (history then future).
void validate_values(const ForecastRequest& req, const std::vector<Task>& ts);

// Tasks of equal history length (the reference's predict_batch needs equal lengths), in order of first appearance.
struct Batch {
    int64_t history = 0;          // T0
    std::vector<size_t> members;  // task indices
};
std::vector<Batch> make_batches(const ForecastRequest& req, const std::vector<Task>& ts);

// One batch's inputs on the host: the candles normalised as the reference does it with numpy, the calendar
// stamps, and each task's channel statistics.
struct HostBatch {
    int64_t B = 0, T0 = 0, P = 0;
    std::vector<float> x;           // [B, T0, 6] normalised and clipped
    std::vector<float> stamp;       // [B, T0 + P, 5] minute, hour, weekday, day, month
    std::vector<float> mean, stdv;  // [B, 6]
};
HostBatch prepare_batch(const ForecastRequest& req, const std::vector<Task>& ts, const Batch& batch, float clip);

// The batch on `device`, every task repeated sample_count (S) times (row = task * S + sample): candles
// [B * S, T0, 6] in `dtype` and stamps [B * S, T0 + P, 5] fp32.
struct DeviceBatch {
    at::Tensor x, stamp;
};
DeviceBatch to_device(const HostBatch& h, int64_t S, float clip, c10::Device device, c10::ScalarType dtype);

// The sampled tokens of the batch's rows (all1/all2 [B * S, T0 + P]) into the trace rows [task * S + sample].
void record_tokens(const at::Tensor& all1, const at::Tensor& all2, const HostBatch& h, const Batch& batch, int64_t S,
                   std::vector<std::vector<int64_t>>& s1_rows, std::vector<std::vector<int64_t>>& s2_rows);

// The decoded candles of the last window z [B * S, Lw, 6] de-normalised into the request's outputs: the mean
// path per series (result [series][horizon]) and, when `paths`, every sample path ([series][sample][horizon]).
void write_outputs(const at::Tensor& z, const HostBatch& h, const std::vector<Task>& ts, const Batch& batch, int64_t S, float* result,
                   float* paths);

}  // namespace cn::kronos
