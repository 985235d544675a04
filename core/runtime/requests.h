// The C++ side of cn_forecast_request and cn_generate_request: plain copies of what the caller set.
// Structural checks happen in the setters (capi); value checks (NaN/Inf, lengths vs horizon) in the model.
// LibTorch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cn {

// A series' values, read-only once added: a copy of its own, or a slice of one block that the series of one
// cn_forecast_request_add_series_batch call share (one block per call instead of a vector per series: faster to add and
// free for large calls, docs/benchmarks.md #19 twelfth step). A moved-from SeriesValues is empty, as a vector is.
class SeriesValues {
public:
    SeriesValues() = default;
    explicit SeriesValues(const std::vector<float>& v) : SeriesValues(copy_of(v.data(), v.size())) {}
    SeriesValues(const SeriesValues&) = default;
    SeriesValues& operator=(const SeriesValues&) = default;
    SeriesValues(SeriesValues&& o) noexcept
        : block_(std::move(o.block_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    SeriesValues& operator=(SeriesValues&& o) noexcept {
        block_ = std::move(o.block_);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        return *this;
    }
    ~SeriesValues() = default;
    // A block holding a copy of p[0, n); none for n == 0.
    static std::shared_ptr<const float[]> block_copy(const float* p, size_t n) {
        if (n == 0) return nullptr;
        std::shared_ptr<float[]> block(new float[n]);
        std::memcpy(block.get(), p, n * sizeof(float));
        return block;
    }
    // n values copied from p into a block of their own.
    static SeriesValues copy_of(const float* p, size_t n) { return n ? slice(block_copy(p, n), 0, n) : SeriesValues(); }
    // Values [offset, offset + n) of a block shared with other series.
    static SeriesValues slice(std::shared_ptr<const float[]> block, size_t offset, size_t n) {
        SeriesValues s;
        s.data_ = block.get() + offset;
        s.size_ = n;
        s.block_ = std::move(block);
        return s;
    }
    const float* data() const { return data_; }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    const float* begin() const { return data_; }
    const float* end() const { return data_ + size_; }
    float operator[](size_t i) const { return data_[i]; }

private:
    std::shared_ptr<const float[]> block_;
    const float* data_ = nullptr;
    size_t size_ = 0;
};

struct ForecastSeries {
    SeriesValues values;
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
    // Toto's decoding (cn_forecast_request_set_decoding): sample paths per model call (0: all of sample_count in
    // one), the KV cache over patches (the reference's default), and the mixture's mean rolled out instead of
    // samples.
    int32_t samples_per_batch = 0;
    bool kv_cache = true;
    bool mean_rollout = false;
};

struct ForecastShape {
    uint64_t n_series = 0, n_outputs = 0, horizon = 0, n_samples = 0;
    uint64_t n_values() const { return n_series * n_outputs * horizon; }
    // A sample path is one output wide (Kronos' mean path, Toto's path), whatever the forecast's outputs are.
    uint64_t n_sample_values() const { return n_series * n_samples * horizon; }
};

class Adapter;  // core/runtime/adapters.h

// An adapter (loaded and validated against a model) and the user's scale for it, in a request.
struct AdapterUse {
    std::shared_ptr<const Adapter> adapter;
    float scale = 1.0f;
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
    int32_t count = 1;                 // images per call (CN_GENERATE_MAX_COUNT at most): image i from seed + i
    std::vector<AdapterUse> adapters;  // fused in this order (adapters.h)
    std::string lora_path;             // cn_generate_request_set_lora: one more adapter, read at generation
    float lora_scale = 1.0f;
};

}  // namespace cn
