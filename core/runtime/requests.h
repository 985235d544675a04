// The C++ side of cn_forecast_request and cn_generate_request: plain copies of what the caller set.
// Structural checks happen in the setters (capi); value checks (NaN/Inf, lengths vs horizon) in the model.
// LibTorch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cn {

struct ForecastSeries {
    std::vector<float> values;
    int64_t group = -1;               // -1: a task of its own
    std::vector<int64_t> timestamps;  // history, optional (Kronos)
    std::vector<int64_t> future_timestamps;
};

struct ForecastCovariate {
    size_t series_index = 0;  // the task (group) it belongs to
    bool categorical = false;
    std::vector<float> past;                                // numeric
    std::vector<float> future;                              // numeric, known future values (may be empty)
    std::vector<std::optional<std::string>> past_labels;    // categorical
    std::vector<std::optional<std::string>> future_labels;  // categorical
    size_t past_length() const { return categorical ? past_labels.size() : past.size(); }
    size_t future_length() const { return categorical ? future_labels.size() : future.size(); }
};

struct ForecastRequest {
    std::vector<ForecastSeries> series;
    std::vector<ForecastCovariate> covariates;
    int64_t horizon = 0;
    std::vector<float> quantiles;  // empty: the model's own levels
    // Sampling (Kronos).
    float temperature = 1.0f;
    int32_t top_k = 0;
    float top_p = 0.9f;
    int32_t sample_count = 1;
};

struct ForecastShape {
    uint64_t n_series = 0, n_outputs = 0, horizon = 0, n_samples = 0;
    uint64_t n_values() const { return n_series * n_outputs * horizon; }
    uint64_t n_sample_values() const { return n_series * n_samples * n_outputs * horizon; }
};

struct GenerateRequest {
    std::string prompt;
    std::optional<std::string> negative_prompt;  // unset: none (the pipeline's default, "")
    int32_t width = 1024;
    int32_t height = 1024;
    int32_t steps = -1;      // -1: the model's default (CN_GENERATE_DEFAULT_STEPS)
    float guidance = -1.0f;  // negative: the model's default; 0: no CFG; > 0: pos + g (pos - neg)
    double cfg_truncation = 1.0;
    double cfg_normalization = 0.0;
    std::string lora_path;
    float lora_scale = 1.0f;
};

}  // namespace cn
