// Run options, forecast requests and generate requests: plain data the caller fills before a call.
// Setters check structure (NULLs, lengths, ranges); values (NaN/Inf) are checked by the model at call time.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <new>
#include <string>
#include <vector>

#include "capi/capi_internal.h"

using cn::Status;
using cn::capi::guarded;
using cn::capi::require;

namespace {

constexpr size_t kMaxSeriesLength = size_t{1} << 28;  // 268M values per series
constexpr size_t kMaxSeries = size_t{1} << 20;
constexpr int64_t kMaxRequestHorizon = int64_t{1} << 20;  // any model; each model has its own, lower limit
constexpr size_t kMaxQuantiles = 1024;

void check_array(const void* p, size_t n, const char* what) {
    if (n > 0 && p == nullptr) cn::fail(Status::kInvalidArgument, std::string(what) + " is NULL but its length is not 0");
    if (n > kMaxSeriesLength) {
        cn::fail(Status::kInvalidArgument,
                 std::string(what) + ": length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxSeriesLength));
    }
}

cn::ForecastSeries& series_at(cn_forecast_request* req, size_t index, const char* what) {
    if (index >= req->r.series.size()) {
        cn::fail(Status::kInvalidArgument, std::string(what) + ": series_index " + std::to_string(index) + " but the request has " +
                                               std::to_string(req->r.series.size()) + " series");
    }
    return req->r.series[index];
}

template <class T>
cn_status create(T** out, cn_error* err) {
    if (out) *out = nullptr;
    return guarded(err, [&] {
        require(out, "out");
        *out = new T();
    });
}

std::vector<std::optional<std::string>> copy_labels(const char* const* labels, size_t n) {
    std::vector<std::optional<std::string>> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        if (labels[i])
            out.emplace_back(labels[i]);
        else
            out.emplace_back(std::nullopt);
    }
    return out;
}

}  // namespace

extern "C" {

/* ---- run options ---- */

cn_status cn_run_options_create(cn_run_options** out, cn_error* err) { return create(out, err); }

void cn_run_options_free(cn_run_options* opts) { delete opts; }

cn_status cn_run_options_set_timeout_ms(cn_run_options* opts, int64_t timeout_ms, cn_error* err) {
    return guarded(err, [&] {
        require(opts, "opts");
        if (timeout_ms < 0) cn::fail(Status::kInvalidArgument, "timeout_ms: must be >= 0");
        opts->ctx.timeout_ms = timeout_ms;
    });
}

cn_status cn_run_options_set_seed(cn_run_options* opts, uint64_t seed, cn_error* err) {
    return guarded(err, [&] {
        require(opts, "opts");
        opts->ctx.seed = seed;
    });
}

void cn_run_options_cancel(cn_run_options* opts) {
    if (opts) opts->ctx.cancel();
}

void cn_run_options_reset(cn_run_options* opts) {
    if (opts) opts->ctx.reset();
}

cn_status cn_run_options_get_progress(const cn_run_options* opts, uint64_t* done, uint64_t* total, cn_error* err) {
    return guarded(err, [&] {
        require(opts, "opts");
        if (done) *done = opts->ctx.done();
        if (total) *total = opts->ctx.total();
    });
}

void cn_call_timings_init(cn_call_timings* timings) {
    if (!timings) return;
    *timings = cn_call_timings{};
    timings->struct_size = sizeof(*timings);
}

cn_status cn_run_options_get_timings(const cn_run_options* opts, cn_call_timings* out, cn_error* err) {
    return guarded(err, [&] {
        require(opts, "opts");
        require(out, "out");
        const cn::RunContext& r = opts->ctx;
        cn_call_timings full;
        cn_call_timings_init(&full);
        full.prepare_ms = r.phase_ms(cn::RunContext::kPrepare);
        full.adapters_ms = r.phase_ms(cn::RunContext::kAdapters);
        full.text_ms = r.phase_ms(cn::RunContext::kText);
        full.denoise_ms = r.phase_ms(cn::RunContext::kDenoise);
        full.decode_ms = r.phase_ms(cn::RunContext::kDecode);
        full.total_ms = r.total_ms();
        // ABI 0.5's struct: fields appended later are written only when the caller's struct has them.
        constexpr uint64_t kSize05 = offsetof(cn_call_timings, total_ms) + sizeof(double);
        cn::capi::write_prefix(out, full, kSize05, "timings", "cn_call_timings_init");
    });
}

/* ---- forecast requests ---- */

cn_status cn_forecast_request_create(cn_forecast_request** out, cn_error* err) { return create(out, err); }

void cn_forecast_request_free(cn_forecast_request* req) { delete req; }

cn_status cn_forecast_request_add_series(cn_forecast_request* req, const float* values, size_t length, int64_t group, size_t* index_out,
                                         cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        check_array(values, length, "values");
        if (length == 0) cn::fail(Status::kInvalidArgument, "values: a series needs at least one value");
        if (group < -1) cn::fail(Status::kInvalidArgument, "group: must be -1 (own task) or >= 0");
        if (req->r.series.size() >= kMaxSeries) cn::fail(Status::kInvalidArgument, "req: too many series");
        cn::ForecastSeries s;
        s.values = cn::SeriesValues::copy_of(values, length);
        s.group = group;
        req->r.series.push_back(std::move(s));
        if (index_out) *index_out = req->r.series.size() - 1;
    });
}

cn_status cn_forecast_request_add_series_batch(cn_forecast_request* req, const float* values, size_t n_series, size_t length,
                                               const int64_t* groups, size_t* first_index_out, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        if (n_series == 0) cn::fail(Status::kInvalidArgument, "n_series: at least one series");
        if (length == 0) cn::fail(Status::kInvalidArgument, "length: a series needs at least one value");
        check_array(values, length, "values");  // a NULL array, and the per-series length limit
        if (n_series > kMaxSeries - req->r.series.size()) {
            cn::fail(Status::kInvalidArgument, "n_series: " + std::to_string(n_series) + " more series would pass the limit of " +
                                                   std::to_string(kMaxSeries) + " per request");
        }
        for (size_t i = 0; groups && i < n_series; ++i) {
            if (groups[i] < -1) cn::fail(Status::kInvalidArgument, "groups[" + std::to_string(i) + "]: must be -1 (own task) or >= 0");
        }
        // Both limits hold, so n_series * length <= 2^48 (size_t is 64-bit on every supported target); everything is
        // checked before anything is added. The values are copied into one block that the new series share
        // (cn::SeriesValues).
        const std::shared_ptr<const float[]> block = cn::SeriesValues::block_copy(values, n_series * length);
        std::vector<cn::ForecastSeries> added(n_series);
        for (size_t i = 0; i < n_series; ++i) {
            added[i].values = cn::SeriesValues::slice(block, i * length, length);
            added[i].group = groups ? groups[i] : -1;
        }
        const size_t first = req->r.series.size();
        // Inserting at the end either completes or, when its allocation fails, leaves the series as they were (the
        // elements move without throwing); no exact-size reserve, so repeated calls keep the vector's growth amortised.
        req->r.series.insert(req->r.series.end(), std::make_move_iterator(added.begin()), std::make_move_iterator(added.end()));
        if (first_index_out) *first_index_out = first;
    });
}

cn_status cn_forecast_request_add_covariate(cn_forecast_request* req, size_t series_index, const float* past, size_t past_length,
                                            const float* future, size_t future_length, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        const auto& s = series_at(req, series_index, "covariate");
        check_array(past, past_length, "past");
        check_array(future, future_length, "future");
        if (past_length != s.values.size()) {
            cn::fail(Status::kInvalidArgument,
                     "past: length " + std::to_string(past_length) + " differs from the series' " + std::to_string(s.values.size()));
        }
        cn::ForecastCovariate c;
        c.series_index = series_index;
        c.past.assign(past, past + past_length);
        if (future_length) c.future.assign(future, future + future_length);
        req->r.covariates.push_back(std::move(c));
    });
}

cn_status cn_forecast_request_add_categorical_covariate(cn_forecast_request* req, size_t series_index, const char* const* past,
                                                        size_t past_length, const char* const* future, size_t future_length,
                                                        cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        const auto& s = series_at(req, series_index, "covariate");
        check_array(past, past_length, "past");
        check_array(future, future_length, "future");
        if (past_length != s.values.size()) {
            cn::fail(Status::kInvalidArgument,
                     "past: length " + std::to_string(past_length) + " differs from the series' " + std::to_string(s.values.size()));
        }
        cn::ForecastCovariate c;
        c.series_index = series_index;
        c.categorical = true;
        c.past_labels = copy_labels(past, past_length);
        c.future_labels = copy_labels(future, future_length);
        req->r.covariates.push_back(std::move(c));
    });
}

cn_status cn_forecast_request_set_timestamps(cn_forecast_request* req, size_t series_index, const int64_t* history, size_t history_length,
                                             const int64_t* future, size_t future_length, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        auto& s = series_at(req, series_index, "timestamps");
        check_array(history, history_length, "history");
        check_array(future, future_length, "future");
        if (history_length != s.values.size()) {
            cn::fail(Status::kInvalidArgument,
                     "history: length " + std::to_string(history_length) + " differs from the series' " + std::to_string(s.values.size()));
        }
        std::vector<int64_t> all(history, history + history_length);
        if (future_length) all.insert(all.end(), future, future + future_length);
        for (size_t i = 1; i < all.size(); ++i) {
            if (all[i] <= all[i - 1]) {
                cn::fail(Status::kInvalidArgument, "timestamps: not strictly increasing at position " + std::to_string(i));
            }
        }
        s.timestamps.assign(history, history + history_length);
        s.future_timestamps.assign(future, future + future_length);
    });
}

cn_status cn_forecast_request_set_horizon(cn_forecast_request* req, int64_t horizon, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        if (horizon < 1 || horizon > kMaxRequestHorizon) {
            cn::fail(Status::kInvalidArgument,
                     "horizon: must be in [1, " + std::to_string(kMaxRequestHorizon) + "], got " + std::to_string(horizon));
        }
        req->r.horizon = horizon;
    });
}

cn_status cn_forecast_request_set_quantiles(cn_forecast_request* req, const float* levels, size_t count, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        require(levels, "levels");
        if (count == 0 || count > kMaxQuantiles) {
            cn::fail(Status::kInvalidArgument, "levels: count must be in [1, " + std::to_string(kMaxQuantiles) + "]");
        }
        for (size_t i = 0; i < count; ++i) {
            if (!(levels[i] > 0.0f && levels[i] < 1.0f)) {
                cn::fail(Status::kInvalidArgument, "levels[" + std::to_string(i) + "]: must lie in (0, 1)");
            }
        }
        req->r.quantiles.assign(levels, levels + count);
    });
}

cn_status cn_forecast_request_set_sampling(cn_forecast_request* req, float temperature, int32_t top_k, float top_p, int32_t sample_count,
                                           cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        if (!(std::isfinite(temperature) && temperature > 0.0f)) cn::fail(Status::kInvalidArgument, "temperature: must be finite and > 0");
        if (top_k < 0) cn::fail(Status::kInvalidArgument, "top_k: must be >= 0");
        if (!(top_p > 0.0f && top_p <= 1.0f)) cn::fail(Status::kInvalidArgument, "top_p: must lie in (0, 1]");
        if (sample_count < 1 || sample_count > 4096) cn::fail(Status::kInvalidArgument, "sample_count: must be in [1, 4096]");
        req->r.temperature = temperature;
        req->r.top_k = top_k;
        req->r.top_p = top_p;
        req->r.sample_count = sample_count;
    });
}

cn_status cn_forecast_request_set_decoding(cn_forecast_request* req, int32_t samples_per_batch, int32_t kv_cache, int32_t mean_rollout,
                                           cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        if (samples_per_batch < 0 || samples_per_batch > 4096)
            cn::fail(Status::kInvalidArgument, "samples_per_batch: must be in [0, 4096]");
        if ((kv_cache != 0 && kv_cache != 1) || (mean_rollout != 0 && mean_rollout != 1)) {
            cn::fail(Status::kInvalidArgument, "kv_cache, mean_rollout: must be 0 or 1");
        }
        req->r.samples_per_batch = samples_per_batch;
        req->r.kv_cache = kv_cache == 1;
        req->r.mean_rollout = mean_rollout == 1;
    });
}

/* ---- generate requests ---- */

cn_status cn_generate_request_create(cn_generate_request** out, cn_error* err) { return create(out, err); }

void cn_generate_request_free(cn_generate_request* req) { delete req; }

cn_status cn_generate_request_set_prompt(cn_generate_request* req, const char* prompt, const char* negative_prompt, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        require(prompt, "prompt");
        for (auto [text, name] : {std::pair{prompt, "prompt"}, std::pair{negative_prompt, "negative_prompt"}}) {
            if (text && std::strlen(text) > CN_GENERATE_MAX_PROMPT_BYTES) {
                cn::fail(Status::kInvalidArgument, std::string(name) + ": longer than CN_GENERATE_MAX_PROMPT_BYTES (" +
                                                       std::to_string(CN_GENERATE_MAX_PROMPT_BYTES) + " bytes)");
            }
        }
        req->r.prompt = prompt;
        req->r.negative_prompt = negative_prompt ? std::optional<std::string>(negative_prompt) : std::nullopt;
    });
}

cn_status cn_generate_request_set_size(cn_generate_request* req, int32_t width, int32_t height, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        for (auto [v, name] : {std::pair{width, "width"}, std::pair{height, "height"}}) {
            if (v < 1 || v > 4096)
                cn::fail(Status::kInvalidArgument, std::string(name) + ": must be in [1, 4096], got " + std::to_string(v));
        }
        req->r.width = width;
        req->r.height = height;
    });
}

cn_status cn_generate_request_set_steps(cn_generate_request* req, int32_t steps, float guidance, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        if (steps != CN_GENERATE_DEFAULT_STEPS && (steps < 1 || steps > 1000)) {
            cn::fail(Status::kInvalidArgument,
                     "steps: must be in [1, 1000] or CN_GENERATE_DEFAULT_STEPS (-1), got " + std::to_string(steps));
        }
        if (!std::isfinite(guidance)) cn::fail(Status::kInvalidArgument, "guidance: must be finite");
        req->r.steps = steps;
        req->r.guidance = guidance;
    });
}

cn_status cn_generate_request_set_cfg(cn_generate_request* req, double truncation, double normalization, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        if (!std::isfinite(truncation)) cn::fail(Status::kInvalidArgument, "truncation: must be finite");
        if (!(std::isfinite(normalization) && normalization >= 0.0)) {
            cn::fail(Status::kInvalidArgument, "normalization: must be finite and >= 0");
        }
        req->r.cfg_truncation = truncation;
        req->r.cfg_normalization = normalization;
    });
}

cn_status cn_generate_request_set_count(cn_generate_request* req, int32_t count, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        if (count < 1 || count > CN_GENERATE_MAX_COUNT) {
            cn::fail(Status::kInvalidArgument,
                     "count: must be in [1, " + std::to_string(CN_GENERATE_MAX_COUNT) + "], got " + std::to_string(count));
        }
        req->r.count = count;
    });
}

cn_status cn_generate_request_set_lora(cn_generate_request* req, const char* lora_path, float scale, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        if (!std::isfinite(scale)) cn::fail(Status::kInvalidArgument, "scale: must be finite");
        req->r.lora_path = lora_path ? lora_path : "";
        req->r.lora_scale = scale;
    });
}

}  // extern "C"
