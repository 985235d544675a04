// Kronos' request handling around the decoding: tasks and their checks, batches, normalisation and calendar
// stamps (as KronosPredictor.predict_batch computes them), trace rows and the de-normalised outputs.
#include "core/models/kronos/kronos_pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <ATen/ops/clip.h>
#include <ATen/ops/from_blob.h>

#include "core/common/numpy_sum.h"
#include "core/common/status.h"

namespace cn::kronos {
namespace {

[[noreturn]] void invalid(const std::string& msg) { fail(Status::kInvalidArgument, msg); }

// Calendar features of Unix seconds (UTC): minute, hour, weekday (Monday 0), day, month.
void calendar(int64_t t, float* out) {
    int64_t days = t / 86400, secs = t % 86400;
    if (secs < 0) secs += 86400, --days;
    // civil date from days since 1970-01-01 (H. Hinnant's algorithm)
    const int64_t z = days + 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    const int64_t d = doy - (153 * mp + 2) / 5 + 1;
    const int64_t m = mp < 10 ? mp + 3 : mp - 9;
    const int64_t wd = ((days % 7) + 7 + 3) % 7;  // 1970-01-01 was a Thursday (3)
    out[0] = static_cast<float>((secs / 60) % 60);
    out[1] = static_cast<float>(secs / 3600);
    out[2] = static_cast<float>(wd);
    out[3] = static_cast<float>(d);
    out[4] = static_cast<float>(m);
}

void check_request(const ForecastRequest& req, const PredictorConfig& cfg) {
    if (req.series.empty()) invalid("series: the request has none");
    if (req.horizon < 1) invalid("horizon: not set (must be >= 1)");
    if (req.horizon > cfg.max_context) {
        invalid("horizon: " + std::to_string(req.horizon) + " exceeds max_context " + std::to_string(cfg.max_context) +
                " (the reference decodes one window)");
    }
    if (!req.covariates.empty()) invalid("covariates: Kronos takes none (pass OHLCV channels as a group)");
    if (!req.quantiles.empty()) invalid("quantiles: Kronos forecasts a mean path and sample paths, not quantiles");
    if (!(req.temperature >= kMinTemperature) || !std::isfinite(req.temperature)) {
        // logits / temperature must stay finite: below this the softmax can turn NaN (the reference then raises)
        invalid("temperature: must be >= 1e-6");
    }
    if (req.top_k < 0) invalid("top_k: must be >= 0");
    if (!(req.top_p > 0 && req.top_p <= 1)) invalid("top_p: must be in (0, 1]");
    if (req.sample_count < 1 || req.sample_count > kMaxSamplePaths) {
        invalid("sample_count: must be in [1, " + std::to_string(kMaxSamplePaths) + "]");
    }
}

void check_task(const ForecastRequest& req, const Task& t) {
    const std::string name = "group " + std::to_string(req.series[t.series[0]].group);
    if (t.series.size() < 4 || t.series.size() > 6) {
        invalid(name + ": " + std::to_string(t.series.size()) + " series; Kronos needs open, high, low, close[, volume[, amount]]");
    }
    const size_t n = req.series[t.series[0]].values.size();
    if (n == 0) invalid("series[" + std::to_string(t.series[0]) + "]: empty (Kronos needs history)");
    for (size_t s : t.series) {
        if (req.series[s].values.size() != n) {
            invalid("series[" + std::to_string(s) + "]: length " + std::to_string(req.series[s].values.size()) +
                    " differs from its group's " + std::to_string(n));
        }
    }
    const ForecastSeries& first = req.series[t.series[0]];
    if (first.timestamps.size() != n || first.future_timestamps.size() != static_cast<size_t>(req.horizon)) {
        invalid("timestamps: series[" + std::to_string(t.series[0]) + "] (first of " + name + ") needs " + std::to_string(n) +
                " history and " + std::to_string(req.horizon) + " future timestamps");
    }
}

}  // namespace

std::vector<Task> make_tasks(const ForecastRequest& req, const PredictorConfig& cfg) {
    check_request(req, cfg);
    std::vector<Task> out;
    std::map<int64_t, size_t> by_group;
    for (size_t i = 0; i < req.series.size(); ++i) {
        const int64_t g = req.series[i].group;
        if (g < 0) {
            invalid("series[" + std::to_string(i) +
                    "]: Kronos needs each task as a group of 4-6 series "
                    "(open, high, low, close[, volume[, amount]])");
        }
        auto it = by_group.find(g);
        if (it == by_group.end()) {
            by_group[g] = out.size();
            out.push_back({{i}});
        } else {
            out[it->second].series.push_back(i);
        }
    }
    for (const Task& t : out) check_task(req, t);
    if (static_cast<int64_t>(out.size()) * req.sample_count > kMaxBatchRows) {
        invalid("sample_count: " + std::to_string(out.size()) + " tasks x " + std::to_string(req.sample_count) + " samples exceeds " +
                std::to_string(kMaxBatchRows) + " rows per call");
    }
    int64_t token_rows = 0;
    for (const Task& t : out) {
        const int64_t n = static_cast<int64_t>(req.series[t.series[0]].values.size());
        if (n > kMaxHistoryBars) {
            invalid("series[" + std::to_string(t.series[0]) + "]: history of " + std::to_string(n) + " bars exceeds " +
                    std::to_string(kMaxHistoryBars));
        }
        token_rows += req.sample_count * std::min<int64_t>(n + req.horizon, cfg.max_context);
    }
    if (token_rows > kMaxTokenRows) {
        invalid("request too large: tasks x sample_count x window = " + std::to_string(token_rows) + " token rows exceeds " +
                std::to_string(kMaxTokenRows) + "; split it into several calls");
    }
    return out;
}

void validate_values(const ForecastRequest& req, const std::vector<Task>& ts) {
    for (const Task& t : ts) {
        for (size_t s : t.series) {
            const auto& v = req.series[s].values;
            for (size_t k = 0; k < v.size(); ++k) {
                if (!std::isfinite(v[k])) {
                    invalid("series[" + std::to_string(s) + "][" + std::to_string(k) + "]: " + (std::isnan(v[k]) ? "NaN" : "Inf") +
                            " (Kronos takes no missing values)");
                }
            }
        }
        const ForecastSeries& f = req.series[t.series[0]];
        std::vector<int64_t> all(f.timestamps);
        all.insert(all.end(), f.future_timestamps.begin(), f.future_timestamps.end());
        for (size_t k = 1; k < all.size(); ++k) {
            if (all[k] <= all[k - 1]) {
                invalid("timestamps: series[" + std::to_string(t.series[0]) + "] not strictly increasing at " + std::to_string(k) +
                        " (history then future)");
            }
        }
    }
}

std::vector<Batch> make_batches(const ForecastRequest& req, const std::vector<Task>& ts) {
    std::vector<Batch> batches;
    for (size_t i = 0; i < ts.size(); ++i) {
        const int64_t n = static_cast<int64_t>(req.series[ts[i].series[0]].values.size());
        auto it = std::find_if(batches.begin(), batches.end(), [&](const Batch& b) { return b.history == n; });
        if (it == batches.end())
            batches.push_back({n, {i}});
        else
            it->members.push_back(i);
    }
    return batches;
}

HostBatch prepare_batch(const ForecastRequest& req, const std::vector<Task>& ts, const Batch& batch, float clip) {
    HostBatch h;
    const int64_t B = static_cast<int64_t>(batch.members.size()), T0 = batch.history, P = req.horizon;
    h.B = B;
    h.T0 = T0;
    h.P = P;
    // Inputs [B, T0, 6] float32 normalised as the reference does it with numpy: each channel's mean and std
    // with numpy's pairwise fp32 sums (core/common/numpy_sum.h; the order decides whether a constant channel
    // normalises to 0 or to about -0.43), per series; stamps [B, T0 + P, 5].
    h.x.resize(B * T0 * 6);
    h.stamp.resize(B * (T0 + P) * 5);
    h.mean.resize(B * 6);
    h.stdv.resize(B * 6);
    for (int64_t b = 0; b < B; ++b) {
        const Task& t = ts[batch.members[b]];
        float* xb = h.x.data() + b * T0 * 6;
        for (int64_t i = 0; i < T0; ++i) {
            float row[6] = {0, 0, 0, 0, 0, 0};
            for (size_t c = 0; c < t.series.size(); ++c) row[c] = req.series[t.series[c]].values[i];
            if (t.series.size() == 5) {
                const double m = ((static_cast<double>(row[0]) + row[1]) + row[2] + row[3]) / 4.0;
                row[5] = static_cast<float>(static_cast<double>(row[4]) * m);
            }
            std::copy(row, row + 6, xb + i * 6);
        }
        for (int c = 0; c < 6; ++c) {
            float mu, sd;
            numpy::column_mean_std(xb + c, T0, 6, mu, sd);
            h.mean[b * 6 + c] = mu;
            h.stdv[b * 6 + c] = sd;
            const float den = sd + static_cast<float>(1e-5);
            for (int64_t i = 0; i < T0; ++i) {
                float v = (xb[i * 6 + c] - mu) / den;
                xb[i * 6 + c] = v < -clip ? -clip : (v > clip ? clip : v);
            }
        }
        const ForecastSeries& f = req.series[t.series[0]];
        for (int64_t i = 0; i < T0 + P; ++i) {
            calendar(i < T0 ? f.timestamps[i] : f.future_timestamps[i - T0], h.stamp.data() + (b * (T0 + P) + i) * 5);
        }
    }
    return h;
}

DeviceBatch to_device(const HostBatch& h, int64_t S, float clip, c10::Device device, c10::ScalarType dtype) {
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    // Repeat every series S times: row = b * S + s.
    auto rep = [&](const std::vector<float>& v, int64_t len, int64_t ch) {
        return at::from_blob(const_cast<float*>(v.data()), {h.B, len, ch}, f32)
            .to(device)
            .unsqueeze(1)
            .repeat({1, S, 1, 1})
            .reshape({-1, len, ch});
    };
    DeviceBatch d;
    d.x = at::clip(rep(h.x, h.T0, 6), -clip, clip).to(dtype);  // normalised on the host in fp32
    d.stamp = rep(h.stamp, h.T0 + h.P, 5);
    return d;
}

void record_tokens(const at::Tensor& all1, const at::Tensor& all2, const HostBatch& h, const Batch& batch, int64_t S,
                   std::vector<std::vector<int64_t>>& s1_rows, std::vector<std::vector<int64_t>>& s2_rows) {
    const int64_t T0 = h.T0, P = h.P;
    const at::Tensor g1 = all1.slice(1, T0).to(at::kCPU).contiguous(), g2 = all2.slice(1, T0).to(at::kCPU).contiguous();
    for (int64_t b = 0; b < h.B; ++b) {
        for (int64_t s = 0; s < S; ++s) {
            const int64_t r = b * S + s;
            const size_t dst = batch.members[b] * static_cast<size_t>(S) + static_cast<size_t>(s);
            s1_rows[dst].assign(g1.const_data_ptr<int64_t>() + r * P, g1.const_data_ptr<int64_t>() + (r + 1) * P);
            s2_rows[dst].assign(g2.const_data_ptr<int64_t>() + r * P, g2.const_data_ptr<int64_t>() + (r + 1) * P);
        }
    }
}

void write_outputs(const at::Tensor& z_dev, const HostBatch& h, const std::vector<Task>& ts, const Batch& batch, int64_t S, float* result,
                   float* paths) {
    const int64_t P = h.P;
    const at::Tensor z = z_dev.to(at::kCPU, at::kFloat).contiguous();  // [N, Lw, 6]
    const int64_t Lw = z.size(1);
    const float* zp = z.const_data_ptr<float>();
    for (int64_t b = 0; b < h.B; ++b) {
        const Task& t = ts[batch.members[b]];
        for (int64_t k = 0; k < P; ++k) {
            const int64_t row = Lw - P + k;
            for (size_t c = 0; c < t.series.size(); ++c) {
                // np.mean over the samples (a non-contiguous axis): a sequential fp32 sum.
                const float m = numpy::sequential_mean(zp + (b * S * Lw + row) * 6 + c, S, Lw * 6);
                const float den = h.stdv[b * 6 + c] + static_cast<float>(1e-5);
                const size_t series = t.series[c];
                result[series * static_cast<size_t>(P) + k] = m * den + h.mean[b * 6 + c];
                for (int64_t s = 0; s < S && paths; ++s) {
                    const float v = zp[((b * S + s) * Lw + row) * 6 + c];
                    paths[(series * static_cast<size_t>(S) + s) * static_cast<size_t>(P) + k] = v * den + h.mean[b * 6 + c];
                }
            }
        }
    }
}

}  // namespace cn::kronos
