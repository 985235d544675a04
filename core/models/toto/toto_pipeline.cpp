#include "core/models/toto/toto_pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include "core/common/status.h"
#include "core/models/toto/toto_graphs.h"

namespace cn::toto {
namespace {

[[noreturn]] void invalid(const std::string& msg) { fail(Status::kInvalidArgument, msg); }

int64_t ceil_to(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// The forecaster's step tail: the last patch of a draw (or mean) y, extreme values zeroed, appended to the series
// `in`, and `dummy` (true, one patch) to its padding mask.
void append_next(const at::Tensor& y, const at::Tensor& dummy, at::Tensor& in, at::Tensor& pm) {
    const int64_t P = dummy.size(-1);
    in = at::cat({in, replace_extreme(y.narrow(-1, y.size(-1) - P, P))}, -1);
    pm = at::cat({pm, dummy}, -1);
}

}  // namespace

std::vector<float> default_quantiles() { return {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f}; }

Plan make_plan(const ForecastRequest& req, const TotoConfig& cfg) {
    if (req.series.empty()) invalid("series: the request has none");
    if (req.horizon < 1) invalid("horizon: not set (must be >= 1)");
    if (req.horizon > kMaxSteps) invalid("horizon: " + std::to_string(req.horizon) + " exceeds " + std::to_string(kMaxSteps));
    if (!req.covariates.empty()) invalid("covariates: Toto takes none (pass related series as one group: its variates)");
    if (req.temperature != 1.0f || req.top_k != 0 || req.top_p != 0.9f) {
        invalid("temperature, top_k, top_p: Toto samples its Student-t mixture; leave them at their defaults (1, 0, 0.9)");
    }
    Plan p;
    const int64_t P = cfg.patch_size;
    p.patch = P;
    p.kv_cache = req.kv_cache;
    p.rounded = ceil_to(req.horizon, P);
    if (req.mean_rollout) {
        if (!req.quantiles.empty()) invalid("quantiles: the mean rollout forecasts one path; sample (sample_count) for quantiles");
        p.sample_count = 0;
    } else {
        if (req.sample_count < 1 || req.sample_count > kMaxSamplePaths) {
            invalid("sample_count: must be in [1, " + std::to_string(kMaxSamplePaths) + "]");
        }
        p.sample_count = req.sample_count;
        p.samples_per_batch = req.samples_per_batch == 0 ? p.sample_count : req.samples_per_batch;
        if (p.samples_per_batch < 1 || p.sample_count % p.samples_per_batch != 0) {
            invalid("samples_per_batch: must divide sample_count (" + std::to_string(p.sample_count) + "); 0: all in one batch");
        }
        p.levels = req.quantiles.empty() ? default_quantiles() : req.quantiles;
        for (size_t i = 0; i < p.levels.size(); ++i) {
            if (!(p.levels[i] > 0.0f && p.levels[i] < 1.0f) || (i > 0 && !(p.levels[i] > p.levels[i - 1]))) {
                invalid("quantiles: levels must lie in (0, 1) and ascend");
            }
        }
    }
    // Values: NaN is a missing value; Inf is refused here, before any batch computes.
    for (size_t i = 0; i < req.series.size(); ++i) {
        const SeriesValues& v = req.series[i].values;
        for (size_t j = 0; j < v.size(); ++j) {
            if (std::isinf(v[j])) invalid("series[" + std::to_string(i) + "][" + std::to_string(j) + "]: Inf");
        }
    }
    // Tasks: a group's series in request order; a series of group -1 alone.
    std::map<int64_t, size_t> by_group;
    for (size_t i = 0; i < req.series.size(); ++i) {
        const int64_t g = req.series[i].group;
        size_t t;
        if (g < 0) {
            t = p.tasks.size();
            p.tasks.emplace_back();
        } else {
            auto [it, fresh] = by_group.emplace(g, p.tasks.size());
            if (fresh) p.tasks.emplace_back();
            t = it->second;
        }
        Task& task = p.tasks[t];
        task.series.push_back(i);
        task.length = std::max<int64_t>(task.length, static_cast<int64_t>(req.series[i].values.size()));
    }
    // Batches: tasks with as many variates and the same padded history run as one reference call.
    std::map<std::pair<int64_t, int64_t>, size_t> by_shape;
    for (size_t t = 0; t < p.tasks.size(); ++t) {
        const Task& task = p.tasks[t];
        const std::string name = "series[" + std::to_string(task.series[0]) + "]";
        if (task.length == 0) invalid(name + ": empty (Toto needs history)");
        const int64_t V = static_cast<int64_t>(task.series.size());
        if (V > kMaxVariates)
            invalid(name + ": a group of " + std::to_string(V) + " series (at most " + std::to_string(kMaxVariates) + ")");
        const int64_t L = ceil_to(task.length, P);
        if (L + p.rounded > kMaxSteps) {
            invalid(name + ": history " + std::to_string(task.length) + " and horizon " + std::to_string(req.horizon) + " exceed " +
                    std::to_string(kMaxSteps) + " steps");
        }
        auto [it, fresh] = by_shape.emplace(std::make_pair(V, L), p.batches.size());
        if (fresh) p.batches.push_back(Batch{V, L, {}});
        p.batches[it->second].members.push_back(t);
    }
    // The largest model call: every row of a batch over the whole sequence its network processes at once (the first
    // call with the cache, the last without), and the float64 scaler over the whole series so far (about 24 floats a
    // step); and the KV cache: keys and values of every time-wise layer over every patch. The sample paths kept
    // are the horizon's only (series x samples x horizon: the library's 2^28 output limit bounds them).
    const int64_t width = cfg.embed_dim + 8 * cfg.k_components;
    const int64_t copies = p.sample_count == 0 ? 1 : p.samples_per_batch;
    const std::string what = p.sample_count == 0 ? "series" : "samples_per_batch";
    const std::string advice = p.sample_count == 0 ? "split the request" : "lower samples_per_batch or split the request";
    for (const Batch& b : p.batches) {
        const double rows = static_cast<double>(copies) * static_cast<double>(b.members.size()) * static_cast<double>(b.variates);
        const double total = static_cast<double>(b.padded + p.rounded);
        const double steps = static_cast<double>(req.kv_cache ? b.padded : b.padded + p.rounded - P);
        if (rows * std::max(steps * static_cast<double>(width), total * 24.0) > static_cast<double>(kMaxCallValues)) {
            invalid(what + ": a model call of " + std::to_string(static_cast<int64_t>(rows)) + " rows x " +
                    std::to_string(static_cast<int64_t>(total)) + " steps exceeds the per-call limit of 2^32 activations; " + advice);
        }
        const double cache = 2.0 * static_cast<double>(std::max<int64_t>(1, cfg.time_layers())) * rows *
                             static_cast<double>(cfg.embed_dim) * std::ceil(total / static_cast<double>(P));
        if (req.kv_cache && cache > static_cast<double>(kMaxCallValues)) {
            invalid(what + ": the KV cache of " + std::to_string(static_cast<int64_t>(rows)) + " rows x " +
                    std::to_string(static_cast<int64_t>(std::ceil(total / static_cast<double>(P)))) +
                    " patches exceeds the limit of 2^32 values; " + advice + " (or turn the KV cache off)");
        }
        p.calls += (p.sample_count == 0 ? 1 : p.sample_count / p.samples_per_batch) * (p.rounded / P);
    }
    return p;
}

at::Tensor rollout_from_prefill(const TotoConfig& c, const TotoWeights& w, const Rotary& rot, const Mixture& prefill,
                                const KvCache& prefill_cache, KvCache& cache, const at::Tensor& rin, const at::Tensor& rpm, int64_t H,
                                int64_t rounded, int64_t copies, at::Generator& gen, RunContext* run) {
    const int64_t P = c.patch_size, L = rin.size(-1), R = rin.size(0), V = rin.size(1);
    const at::Tensor dummy = at::ones({R, V, P}, rpm.options());
    at::Tensor in = rin.clone(), pm = rpm.clone();
    for (int64_t i = 0; i < rounded / P; ++i) {
        if (run) run->check();
        Mixture m;
        if (i == 0) {
            cache.fill_repeated(prefill_cache, copies);
            m = repeat_rows(prefill, copies);
        } else {
            m = forward(c, w, rot, in, pm, L, &cache, nullptr, /*fused=*/true);
        }
        if (run && i > 0) run->advance();  // a model call (the first step reuses the prefill)
        append_next(sample(m, gen), dummy, in, pm);
    }
    return in.narrow(-1, L, H).clone();
}

int64_t model_calls(const Plan& plan, bool prefill_once) {
    if (!prefill_once || plan.sample_count == 0 || !plan.kv_cache) return plan.calls;
    const int64_t steps = plan.rounded / plan.patch, batches = plan.sample_count / plan.samples_per_batch;
    return static_cast<int64_t>(plan.batches.size()) * (1 + batches * (steps - 1));
}

int64_t n_outputs(const Plan& plan) { return plan.sample_count == 0 ? 1 : static_cast<int64_t>(plan.levels.size()) + 1; }

void forecast_batch(const Exec& x, const ForecastRequest& req, const Plan& plan, const Batch& batch, float* out, float* samples) {
    const TotoConfig& c = x.cfg;
    const int64_t B = static_cast<int64_t>(batch.members.size()), V = batch.variates, L = batch.padded, P = c.patch_size;
    const int64_t H = req.horizon;
    // The inputs as pad_array leaves them: left-padded with zeros, padding mask false there; a missing value (NaN)
    // is a zero with the padding mask false, as a reference caller masks one (the reference raises on NaN).
    std::vector<float> values(static_cast<size_t>(B * V * L), 0.0f);
    std::vector<uint8_t> mask(values.size(), 0);
    for (int64_t b = 0; b < B; ++b) {
        const Task& task = plan.tasks[batch.members[static_cast<size_t>(b)]];
        for (int64_t v = 0; v < V; ++v) {
            const size_t si = task.series[static_cast<size_t>(v)];
            const SeriesValues& s = req.series[si].values;
            const int64_t n = static_cast<int64_t>(s.size()), off = (b * V + v) * L + (L - n);
            for (int64_t j = 0; j < n; ++j) {
                const float f = s[static_cast<size_t>(j)];
                if (std::isnan(f)) continue;
                values[static_cast<size_t>(off + j)] = f;
                mask[static_cast<size_t>(off + j)] = 1;
            }
        }
    }
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    // The series stay fp32 whatever the model's dtype (the scaler's input; a bf16 model casts after it).
    const at::Tensor inputs = at::from_blob(values.data(), {B, V, L}, f32).to(x.device, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    const at::Tensor pmask =
        at::from_blob(mask.data(), {B, V, L}, at::TensorOptions().dtype(at::kBool)).to(x.device, at::kBool, false, true);
    const int64_t steps = plan.rounded / P;
    const int64_t max_patches = (L + plan.rounded + P - 1) / P;
    int64_t n_calls = 0;
    auto call = [&](const at::Tensor& in, const at::Tensor& pm, KvCache* cache) {
        x.run.check();
        Trace* t = x.trace && n_calls++ == x.trace->call ? x.trace : nullptr;
        Mixture m = forward(c, x.w, x.rot, in, pm, L, cache, t, x.fused);
        x.run.advance();
        return m;
    };
    auto write = [&](int64_t b, int64_t v, int64_t o, const float* path) {
        const size_t si = plan.tasks[batch.members[static_cast<size_t>(b)]].series[static_cast<size_t>(v)];
        std::copy(path, path + H, out + (si * static_cast<size_t>(n_outputs(plan)) + static_cast<size_t>(o)) * static_cast<size_t>(H));
    };
    if (plan.sample_count == 0) {  // TotoForecaster.generate_mean
        at::Tensor in = inputs, pm = pmask;
        const at::Tensor dummy = at::ones({B, V, P}, pmask.options());
        std::unique_ptr<KvCache> cache;
        if (req.kv_cache) cache = std::make_unique<KvCache>(c, B * V, max_patches, x.device, x.dtype);
        for (int64_t i = 0; i < steps; ++i) {
            append_next(mean(call(in, pm, cache.get())), dummy, in, pm);
        }
        const at::Tensor path = in.narrow(-1, L, H).to(at::kCPU, at::kFloat).contiguous();
        const float* p = path.const_data_ptr<float>();
        for (int64_t b = 0; b < B; ++b) {
            for (int64_t v = 0; v < V; ++v) write(b, v, 0, p + (b * V + v) * H);
        }
        return;
    }
    // TotoForecaster.generate_samples: the batch repeated "(s b)" samples_per_batch times, the sample batches in
    // turn with one cache reset between them.
    const int64_t S = plan.sample_count, sbs = plan.samples_per_batch, R = sbs * B;
    const at::Tensor rin = inputs.unsqueeze(0).expand({sbs, B, V, L}).reshape({R, V, L});
    const at::Tensor rpm = pmask.unsqueeze(0).expand({sbs, B, V, L}).reshape({R, V, L});
    const at::Tensor dummy = at::ones({R, V, P}, pmask.options());
    // Graph mode's rollouts use their entry's cache: none is allocated here for them.
    std::unique_ptr<KvCache> cache;
    if (req.kv_cache && !(x.fused && x.graphs)) cache = std::make_unique<KvCache>(c, R * V, max_patches, x.device, x.dtype);
    // Fused mode: the prefill of the B series, once, and its cache (repeated into each sample batch's).
    std::optional<Mixture> prefill;
    std::unique_ptr<KvCache> prefill_cache;
    if (x.fused && req.kv_cache) {
        prefill_cache = std::make_unique<KvCache>(c, B * V, L / P, x.device, x.dtype);
        prefill = call(inputs, pmask, prefill_cache.get());
    }
    std::vector<at::Tensor> all;
    if (prefill && x.graphs) {  // graph mode: each sample batch one replay of a captured rollout
        all = x.graphs->run(c, x.w, x.rot, *prefill, *prefill_cache, rin, rpm, H, plan.rounded, sbs, S / sbs, x.gen, x.run);
    } else if (prefill) {  // fused mode (fill_repeated rewrites the cache: no reset between sample batches)
        for (int64_t nb = 0; nb < S / sbs; ++nb) {
            all.push_back(
                rollout_from_prefill(c, x.w, x.rot, *prefill, *prefill_cache, *cache, rin, rpm, H, plan.rounded, sbs, x.gen, &x.run));
        }
    } else {  // eager: the reference's loop
        for (int64_t nb = 0; nb < S / sbs; ++nb) {
            at::Tensor in = rin.clone(), pm = rpm.clone();
            for (int64_t i = 0; i < steps; ++i) {
                append_next(sample(call(in, pm, cache.get()), x.gen), dummy, in, pm);
            }
            all.push_back(in.narrow(-1, L, H).clone());  // the horizon's steps only
            if (cache) cache->reset();
        }
    }
    // "(samples batch) v t -> batch v t samples", trimmed to the horizon: a strided view, reduced as the reference
    // does (the sample dimension outermost, the steps contiguous).
    const at::Tensor paths = at::cat(all, 0).reshape({S, B, V, H}).permute({1, 2, 3, 0});
    std::vector<at::Tensor> stats;
    for (float q : plan.levels) stats.push_back(at::quantile(paths, at::scalar_tensor(q, paths.options()), -1, false, "linear"));
    stats.push_back(paths.mean(-1));
    const at::Tensor st = at::stack(stats, 2).to(at::kCPU, at::kFloat).contiguous();  // [B, V, outputs, H]
    const float* sp = st.const_data_ptr<float>();
    const int64_t no = n_outputs(plan);
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t v = 0; v < V; ++v) {
            for (int64_t o = 0; o < no; ++o) write(b, v, o, sp + ((b * V + v) * no + o) * H);
        }
    }
    if (samples) {
        const at::Tensor sp_all = paths.permute({0, 1, 3, 2}).to(at::kCPU, at::kFloat).contiguous();  // [B, V, S, H]
        const float* a = sp_all.const_data_ptr<float>();
        for (int64_t b = 0; b < B; ++b) {
            for (int64_t v = 0; v < V; ++v) {
                const size_t si = plan.tasks[batch.members[static_cast<size_t>(b)]].series[static_cast<size_t>(v)];
                std::copy(a + (b * V + v) * S * H, a + (b * V + v + 1) * S * H, samples + si * static_cast<size_t>(S * H));
            }
        }
    }
}

}  // namespace cn::toto
