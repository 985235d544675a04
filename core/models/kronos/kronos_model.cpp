#include "core/models/kronos/kronos_model.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <set>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clip.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/arange.h>
#ifdef CN_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>

#include "core/models/kronos/kronos_graphs.h"
#endif

#include "core/common/numpy_sum.h"
#include "core/common/status.h"
#include "core/format/checkpoint.h"
#include "core/models/kronos/kronos_config.h"
#include "core/models/kronos/kronos_forward.h"
#include "core/runtime/weights.h"

namespace cn::kronos {
namespace {

// ---- weights ------------------------------------------------------------------------------------------

at::Tensor default_inv_freq(int64_t dim, c10::Device device) {
    // 1.0 / (10000 ** (arange(0, dim, 2).float() / dim)), as RotaryPositionalEmbedding computes it
    const at::Tensor e = at::arange(0, dim, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / static_cast<double>(dim);
    return (1.0 / at::pow(10000, e)).to(device);
}

// One Linear whose weight (and bias) rows are the parts' in order; the parts become row slices of it (same
// values, so the unfused ops are unchanged) and the fused GEMM replaces several small ones.
Linear fuse(std::initializer_list<Linear*> parts) {
    std::vector<at::Tensor> ws, bs;
    for (const Linear* l : parts) {
        ws.push_back(l->w);
        if (l->b.defined()) bs.push_back(l->b);
    }
    const bool bias = bs.size() == ws.size();
    if (!bias && !bs.empty()) fail(Status::kInternal, "fuse: some parts have a bias and some do not");
    Linear f{at::cat(ws, 0), bias ? at::cat(bs, 0) : at::Tensor()};
    int64_t row = 0;
    for (Linear* l : parts) {
        const int64_t n = l->w.size(0);
        l->w = f.w.narrow(0, row, n);
        if (bias) l->b = f.b.narrow(0, row, n);
        row += n;
    }
    return f;
}

struct Loader {
    Weights& w;
    std::shared_ptr<const format::Checkpoint> ckpt;
    c10::Device device;
    void lin(const std::string& p, int64_t out, int64_t in, bool bias = true) {
        w.expect(p + ".weight", {out, in});
        if (bias) w.expect(p + ".bias", {out});
    }
    Linear L(const std::string& p, bool bias = true) const {
        return Linear{w.load(p + ".weight"), bias ? w.load(p + ".bias") : at::Tensor()};
    }
    void expect_block(const std::string& p, int64_t d, int64_t ff) {
        w.expect(p + ".norm1.weight", {d});
        w.expect(p + ".norm2.weight", {d});
        for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) lin(p + ".self_attn." + n, d, d);
        lin(p + ".ffn.w1", ff, d, false);
        lin(p + ".ffn.w3", ff, d, false);
        lin(p + ".ffn.w2", d, ff, false);
    }
    // The rotary buffer when the checkpoint has it (it is persistent), else the reference's formula.
    at::Tensor inv_freq(const std::string& name, int64_t head_dim) const {
        if (const auto* ref = ckpt->find(name); ref && ref->entry->shape == std::vector<int64_t>{head_dim / 2}) {
            return tensor_view(ckpt, *ref).to(at::kFloat).to(device).clone();
        }
        return default_inv_freq(head_dim, device);
    }
    // `fused`: also build the fused QKV and w1|w3 weights (only the kernels path on CUDA uses them; elsewhere
    // they would only cost memory and break mmap aliasing).
    Block block(const std::string& p, int64_t heads, int64_t d, bool fused = false) const {
        Block b;
        b.norm1 = w.load(p + ".norm1.weight");
        b.norm2 = w.load(p + ".norm2.weight");
        b.q = L(p + ".self_attn.q_proj");
        b.k = L(p + ".self_attn.k_proj");
        b.v = L(p + ".self_attn.v_proj");
        b.o = L(p + ".self_attn.out_proj");
        b.w1 = w.load(p + ".ffn.w1.weight");
        b.w2 = w.load(p + ".ffn.w2.weight");
        b.w3 = w.load(p + ".ffn.w3.weight");
        if (fused) {
            b.qkv = fuse({&b.q, &b.k, &b.v});
            Linear w1{b.w1, {}}, w3{b.w3, {}};
            b.w13 = fuse({&w1, &w3}).w;
            b.w1 = w1.w;
            b.w3 = w3.w;
        }
        b.heads = heads;
        b.inv_freq = inv_freq(p + ".self_attn.rotary.inv_freq", d / heads);
        return b;
    }
};

// Buffers and training-only tensors a checkpoint may carry.
void allow_extras(Weights& w, const format::Checkpoint& c) {
    for (const auto& [name, ref] : c.tensors()) {
        if (name.find("rotary.inv_freq") != std::string::npos || name.rfind("tokenizer.bsq.", 0) == 0 ||
            name.rfind("post_quant_embed_pre.", 0) == 0) {
            w.allow_unused(name);
        }
    }
}

// ---- calendar features of Unix seconds (UTC): minute, hour, weekday (Monday 0), day, month ----------------

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

// ---- the model ----------------------------------------------------------------------------------------

struct Task {
    std::vector<size_t> series;  // channel series indices in request order (4..6)
};

class KronosModel final : public Model {
public:
    KronosModel(ModelOptions options, nlohmann::json config, KronosConfig cfg, TokenizerWeights tw, PredictorWeights pw,
                uint64_t n_parameters)
        : Model(options, std::move(config)), cfg_(cfg), tw_(std::move(tw)), pw_(std::move(pw)) {
        n_parameters_ = n_parameters;
        weight_bytes_ = n_parameters * c10::elementSize(options.dtype);
    }

    cn_model_kind kind() const override { return CN_MODEL_KIND_KRONOS; }

protected:
    // eager: the reference's algorithm (every step recomputes the window): bit-identical on CPU.
    // fused: KV-cached decoding while the window has not slid, last-row heads; equal up to rounding.
    // graph (CUDA): the whole call from CUDA graphs (kronos_graphs.h: prologue, cached decode step on the
    // decode kernels, epilogue; the full-window step once the window slides); equal up to rounding.
    void apply_mode(cn_mode mode) override {
#ifdef CN_WITH_CUDA
        if (mode == CN_MODE_GRAPH && options_.device.is_cuda()) {
            graphs_ = std::make_unique<KronosGraphs>(cfg_.pred, pw_, cfg_.tok, tw_, options_.device);
            return;
        }
        graphs_.reset();
#endif
        if (mode == CN_MODE_GRAPH) Model::apply_mode(mode);  // UNSUPPORTED on CPU
    }

    MemoryUse memory_use() const override {
        MemoryUse m{weight_bytes_, 0, 0};
#ifdef CN_WITH_CUDA
        if (graphs_) m.graph_pool_bytes = graphs_->pool_bytes();
#endif
        return m;
    }

public:

    void fill_info(cn_model_info& info) const override {
        Model::fill_info(info);
        info.context_length = cfg_.pred.max_context;
        info.native_horizon = 1;
        info.max_horizon = cfg_.pred.max_context;
    }

    ForecastShape forecast_shape(const ForecastRequest& req) const override {
        tasks(req);  // structural checks
        ForecastShape s;
        s.n_series = req.series.size();
        s.n_outputs = 1;
        s.horizon = static_cast<uint64_t>(req.horizon);
        s.n_samples = static_cast<uint64_t>(req.sample_count);
        return s;
    }

    void forecast(const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples,
                  size_t samples_count) override {
        forecast_impl(req, run, out, out_count, samples, samples_count, nullptr);
    }

    void forecast_impl(const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples,
                       size_t samples_count, KronosTrace* trace) {
        const ForecastShape shape = forecast_shape(req);
        if (out_count < shape.n_values()) {
            fail(Status::kInvalidArgument, "out_count: " + std::to_string(out_count) + " floats, the forecast needs " +
                                               std::to_string(shape.n_values()));
        }
        if (samples && samples_count < shape.n_sample_values()) {
            fail(Status::kInvalidArgument, "samples_count: " + std::to_string(samples_count) + " floats, the sample paths need " +
                                               std::to_string(shape.n_sample_values()));
        }
        const std::vector<Task> ts = tasks(req);
        validate_values(req, ts);
        const int64_t P = req.horizon;

        // Batches: tasks of equal history length, in order of first appearance (predict_batch needs equal lengths).
        std::vector<std::pair<int64_t, std::vector<size_t>>> batches;
        for (size_t i = 0; i < ts.size(); ++i) {
            const int64_t n = static_cast<int64_t>(req.series[ts[i].series[0]].values.size());
            auto it = std::find_if(batches.begin(), batches.end(), [&](const auto& b) { return b.first == n; });
            if (it == batches.end()) batches.push_back({n, {i}});
            else it->second.push_back(i);
        }
        run.set_total(static_cast<uint64_t>(batches.size()) * static_cast<uint64_t>(P));
        std::vector<float> result(shape.n_values()), paths(samples ? shape.n_sample_values() : 0);
        std::vector<std::vector<int64_t>> s1_rows(trace ? ts.size() * req.sample_count : 0), s2_rows(s1_rows.size());
#ifdef CN_WITH_CUDA
        if (graphs_) {
            // Serialised: the graphs' static buffers and generator are shared. Capture every entry this call needs
            // before seeding, so captures never consume draws of the seeded sequence; a call needing more entries
            // than are kept at once runs the cached path instead (a re-capture would draw from the sequence).
            std::lock_guard<std::mutex> lock(graphs_->mu());
            std::set<int64_t> rows, slide_rows;
            for (const auto& [T0, members] : batches) {
                const int64_t n = static_cast<int64_t>(members.size()) * req.sample_count;
                if (graphable(T0, P)) rows.insert(n);
                if (slides(T0, P) && n * cfg_.pred.max_context <= KronosGraphs::kMaxSlidingTokens) slide_rows.insert(n);
            }
            use_sliding_ = graphs_->fits_sliding(slide_rows.size());
            if (use_sliding_) {
                for (int64_t n : slide_rows) graphs_->sliding(n, req.temperature, req.top_k, req.top_p);
            }
            use_graphs_ = graphs_->fits(rows.size());
            if (use_graphs_) {
                std::map<int64_t, std::set<int64_t>> histories;  // rows -> the history lengths of their batches
                for (const auto& [T0, members] : batches) {
                    if (graphable(T0, P)) histories[static_cast<int64_t>(members.size()) * req.sample_count].insert(T0);
                }
                use_ends_ = true;
                for (const auto& [n, t0s] : histories) use_ends_ = use_ends_ && t0s.size() <= KronosGraphs::kMaxEnds;
                for (const auto& [n, t0s] : histories) {
                    KronosGraphs::Entry& e = graphs_->get(n, req.temperature, req.top_k, req.top_p);
                    for (int64_t T0 : t0s) {
                        if (use_ends_) graphs_->ends(e, T0, P);
                    }
                }
            }
            at::Generator& gen = graphs_->generator();
            {
                std::lock_guard<std::mutex> glock(gen.mutex());
                gen.set_current_seed(run.seed);
            }
            for (const auto& [T0, members] : batches) {
                run_batch(req, ts, members, T0, gen, run, result.data(), paths.empty() ? nullptr : paths.data(), s1_rows, s2_rows);
            }
        } else
#endif
        {
            at::Generator gen = make_generator(run.seed);
            for (const auto& [T0, members] : batches) {
                run_batch(req, ts, members, T0, gen, run, result.data(), paths.empty() ? nullptr : paths.data(), s1_rows, s2_rows);
            }
        }
        if (trace) {
            trace->s1 = std::move(s1_rows);
            trace->s2 = std::move(s2_rows);
        }
        std::copy(result.begin(), result.end(), out);
        if (samples) std::copy(paths.begin(), paths.end(), samples);
    }

private:
    // Groups the request's series into OHLCV tasks; throws INVALID_ARGUMENT naming the field.
    std::vector<Task> tasks(const ForecastRequest& req) const {
        if (req.series.empty()) fail(Status::kInvalidArgument, "series: the request has none");
        if (req.horizon < 1) fail(Status::kInvalidArgument, "horizon: not set (must be >= 1)");
        if (req.horizon > cfg_.pred.max_context) {
            fail(Status::kInvalidArgument, "horizon: " + std::to_string(req.horizon) + " exceeds max_context " +
                                               std::to_string(cfg_.pred.max_context) + " (the reference decodes one window)");
        }
        if (!req.covariates.empty()) fail(Status::kInvalidArgument, "covariates: Kronos takes none (pass OHLCV channels as a group)");
        if (!req.quantiles.empty()) fail(Status::kInvalidArgument, "quantiles: Kronos forecasts a mean path and sample paths, not quantiles");
        if (!(req.temperature >= kMinTemperature) || !std::isfinite(req.temperature)) {
            // logits / temperature must stay finite: below this the softmax can turn NaN (the reference then raises)
            fail(Status::kInvalidArgument, "temperature: must be >= 1e-6");
        }
        if (req.top_k < 0) fail(Status::kInvalidArgument, "top_k: must be >= 0");
        if (!(req.top_p > 0 && req.top_p <= 1)) fail(Status::kInvalidArgument, "top_p: must be in (0, 1]");
        if (req.sample_count < 1 || req.sample_count > kMaxSamples) {
            fail(Status::kInvalidArgument, "sample_count: must be in [1, " + std::to_string(kMaxSamples) + "]");
        }
        std::vector<Task> out;
        std::map<int64_t, size_t> by_group;
        for (size_t i = 0; i < req.series.size(); ++i) {
            const int64_t g = req.series[i].group;
            if (g < 0) {
                fail(Status::kInvalidArgument, "series[" + std::to_string(i) + "]: Kronos needs each task as a group of 4-6 series "
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
        for (const Task& t : out) {
            const std::string name = "group " + std::to_string(req.series[t.series[0]].group);
            if (t.series.size() < 4 || t.series.size() > 6) {
                fail(Status::kInvalidArgument, name + ": " + std::to_string(t.series.size()) +
                                                   " series; Kronos needs open, high, low, close[, volume[, amount]]");
            }
            const size_t n = req.series[t.series[0]].values.size();
            if (n == 0) fail(Status::kInvalidArgument, "series[" + std::to_string(t.series[0]) + "]: empty (Kronos needs history)");
            for (size_t s : t.series) {
                if (req.series[s].values.size() != n) {
                    fail(Status::kInvalidArgument, "series[" + std::to_string(s) + "]: length " + std::to_string(req.series[s].values.size()) +
                                                       " differs from its group's " + std::to_string(n));
                }
            }
            const ForecastSeries& first = req.series[t.series[0]];
            if (first.timestamps.size() != n || first.future_timestamps.size() != static_cast<size_t>(req.horizon)) {
                fail(Status::kInvalidArgument, "timestamps: series[" + std::to_string(t.series[0]) + "] (first of " + name +
                                                   ") needs " + std::to_string(n) + " history and " + std::to_string(req.horizon) +
                                                   " future timestamps");
            }
        }
        // Every task runs as sample_count rows of one batch: bound the rows of a call, the history of a task (the
        // tokenizer attends over all of it) and the token rows a decode step holds (rows x window), which sets the
        // size of every activation.
        if (static_cast<int64_t>(out.size()) * req.sample_count > kMaxRows) {
            fail(Status::kInvalidArgument, "sample_count: " + std::to_string(out.size()) + " tasks x " + std::to_string(req.sample_count) +
                                               " samples exceeds " + std::to_string(kMaxRows) + " rows per call");
        }
        int64_t token_rows = 0;
        for (const Task& t : out) {
            const int64_t n = static_cast<int64_t>(req.series[t.series[0]].values.size());
            if (n > kMaxHistory) {
                fail(Status::kInvalidArgument, "series[" + std::to_string(t.series[0]) + "]: history of " + std::to_string(n) +
                                                   " bars exceeds " + std::to_string(kMaxHistory));
            }
            token_rows += req.sample_count * std::min<int64_t>(n + req.horizon, cfg_.pred.max_context);
        }
        if (token_rows > kMaxTokenRows) {
            fail(Status::kInvalidArgument, "request too large: tasks x sample_count x window = " + std::to_string(token_rows) +
                                               " token rows exceeds " + std::to_string(kMaxTokenRows) + "; split it into several calls");
        }
        return out;
    }

    void validate_values(const ForecastRequest& req, const std::vector<Task>& ts) const {
        for (const Task& t : ts) {
            for (size_t s : t.series) {
                const auto& v = req.series[s].values;
                for (size_t k = 0; k < v.size(); ++k) {
                    if (!std::isfinite(v[k])) {
                        fail(Status::kInvalidArgument, "series[" + std::to_string(s) + "][" + std::to_string(k) + "]: " +
                                                           (std::isnan(v[k]) ? "NaN" : "Inf") + " (Kronos takes no missing values)");
                    }
                }
            }
            const ForecastSeries& f = req.series[t.series[0]];
            std::vector<int64_t> all(f.timestamps);
            all.insert(all.end(), f.future_timestamps.begin(), f.future_timestamps.end());
            for (size_t k = 1; k < all.size(); ++k) {
                if (all[k] <= all[k - 1]) {
                    fail(Status::kInvalidArgument, "timestamps: series[" + std::to_string(t.series[0]) + "] not strictly increasing at " +
                                                       std::to_string(k) + " (history then future)");
                }
            }
        }
    }

    at::Generator make_generator(uint64_t seed) const {
#ifdef CN_WITH_CUDA
        if (options_.device.is_cuda()) {
            at::Generator g = at::cuda::detail::createCUDAGenerator(options_.device.index());
            g.set_current_seed(seed);
            return g;
        }
#endif
        return at::make_generator<at::CPUGeneratorImpl>(seed);
    }

    // One predict_batch call: tasks `members` (all of history length T0).
    void run_batch(const ForecastRequest& req, const std::vector<Task>& ts, const std::vector<size_t>& members, int64_t T0,
                   at::Generator& gen, RunContext& run, float* result, float* paths,
                   std::vector<std::vector<int64_t>>& s1_rows, std::vector<std::vector<int64_t>>& s2_rows) const {
        const int64_t B = static_cast<int64_t>(members.size()), S = req.sample_count, P = req.horizon;
        const int64_t M = cfg_.pred.max_context;
        const float clip = static_cast<float>(cfg_.pred.clip);
        // Inputs [B, T0, 6] float32 normalised as the reference does it with numpy: each channel's mean and std
        // with numpy's pairwise fp32 sums (core/common/numpy_sum.h; the order decides whether a constant channel
        // normalises to 0 or to about -0.43), per series; stamps [B, T0 + P, 5].
        std::vector<float> x(B * T0 * 6), stamp(B * (T0 + P) * 5), mean(B * 6), stdv(B * 6);
        for (int64_t b = 0; b < B; ++b) {
            const Task& t = ts[members[b]];
            float* xb = x.data() + b * T0 * 6;
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
                mean[b * 6 + c] = mu;
                stdv[b * 6 + c] = sd;
                const float den = sd + static_cast<float>(1e-5);
                for (int64_t i = 0; i < T0; ++i) {
                    float v = (xb[i * 6 + c] - mu) / den;
                    xb[i * 6 + c] = v < -clip ? -clip : (v > clip ? clip : v);
                }
            }
            const ForecastSeries& f = req.series[t.series[0]];
            for (int64_t i = 0; i < T0 + P; ++i) {
                calendar(i < T0 ? f.timestamps[i] : f.future_timestamps[i - T0], stamp.data() + (b * (T0 + P) + i) * 5);
            }
        }
        const auto dev = options_.device;
        const auto f32 = at::TensorOptions().dtype(at::kFloat);
        // Repeat every series S times: row = b * S + s.
        auto rep = [&](const std::vector<float>& v, int64_t len, int64_t ch) {
            return at::from_blob(const_cast<float*>(v.data()), {B, len, ch}, f32)
                .to(dev)
                .unsqueeze(1)
                .repeat({1, S, 1, 1})
                .reshape({-1, len, ch});
        };
        at::Tensor xt = at::clip(rep(x, T0, 6), -clip, clip).to(options_.dtype);  // normalised on the host in fp32
        const at::Tensor full_stamp = rep(stamp, T0 + P, 5);
        const int64_t N = B * S;
        // Fused and graph modes on CUDA run the sequence passes on the kernels (fused weights); eager mode, and
        // every mode on CPU, the reference's ops.
        const Path path = mode() != CN_MODE_EAGER && !pw_.blocks.empty() && pw_.blocks[0].qkv.w.defined() ? Path::kKernels
                                                                                                       : Path::kReference;
        // The draw of each step: the reference's ops in eager mode, the kernels' (as graph mode's) otherwise.
        auto sample = [&](const at::Tensor& logits) {
            return path == Path::kKernels ? sample_kernels(logits, req.temperature, req.top_k, req.top_p, gen)
                                          : sample_from_logits(logits, req.temperature, req.top_k, req.top_p, gen);
        };
        at::Tensor all1, all2;  // [N, T0 + P] tokens of the history and the forecast
        at::Tensor z_dev;       // decoded candles of the last window [N, Lw, 6]
#ifdef CN_WITH_CUDA
        KronosGraphs::Entry* graph =
            graphs_ && use_graphs_ && graphable(T0, P) ? &graphs_->get(N, req.temperature, req.top_k, req.top_p) : nullptr;
        KronosGraphs::Ends* ends = graph && use_ends_ ? KronosGraphs::find_ends(*graph, T0, P) : nullptr;
        if (ends) {
            // The whole call as replays: prologue (tokenizer, prefill, first step), P - 1 steps, epilogue.
            KronosStepState& st = graph->st;
            st.stamps.narrow(1, 0, T0 + P - 1).copy_(full_stamp.narrow(1, 0, T0 + P - 1));
            ends->x.copy_(xt);
            if (ends->has_whole) {  // short horizons: one replay (cancellation is checked before it)
                run.check();
                ends->whole.replay();
                run.advance(P);
            } else {
                for (int64_t j = 0; j < P; ++j) {
                    run.check();
                    if (j == 0) {
                        ends->prologue.replay();
                    } else {
                        graph->graph.replay();
                    }
                    run.advance(1);
                }
                ends->epilogue.replay();
            }
            all1 = st.hist1.narrow(1, 0, T0 + P).clone();
            all2 = st.hist2.narrow(1, 0, T0 + P).clone();
            z_dev = ends->z.clone();
        } else
#endif
        {
            auto [tok1, tok2] = tokenizer_encode(cfg_.tok, tw_, xt, path);
            all1 = at::cat({tok1, at::empty({N, P}, tok1.options())}, 1);
            all2 = at::cat({tok2, at::empty({N, P}, tok2.options())}, 1);
            // Cached decoding (fused mode) while the window has not slid (its start stays 0, so positions are fixed);
            // the reference's full recompute otherwise, and always in eager mode.
            const bool use_cache = mode() == CN_MODE_FUSED || mode() == CN_MODE_GRAPH;
            KronosCache cache;
#ifdef CN_WITH_CUDA
            KronosGraphs::Sliding* slide =
                graphs_ && use_sliding_ && slides(T0, P) && N * M <= KronosGraphs::kMaxSlidingTokens
                    ? &graphs_->sliding(N, req.temperature, req.top_k, req.top_p)
                    : nullptr;
            if (graph) {  // the entry's static cache: the prefill fills it, the replays extend it
                graph->st.cache.len = 0;
                cache = graph->st.cache;
            }
#endif
            for (int64_t i = 0; i < P; ++i) {
#ifdef CN_WITH_CUDA
                if (graph && i == 1) {
                    // Steps 1..P-1: replay the captured step; the inputs are the history so far and the stamps.
                    KronosStepState& st = graph->st;
                    st.stamps.narrow(1, 0, T0 + P - 1).copy_(full_stamp.narrow(1, 0, T0 + P - 1));
                    st.hist1.narrow(1, 0, T0 + 1).copy_(all1.narrow(1, 0, T0 + 1));
                    st.hist2.narrow(1, 0, T0 + 1).copy_(all2.narrow(1, 0, T0 + 1));
                    st.pos.fill_(T0);
                    for (int64_t j = 1; j < P; ++j) {
                        run.check();
                        graph->graph.replay();
                        run.advance(1);
                    }
                    all1.narrow(1, T0 + 1, P - 1).copy_(st.hist1.narrow(1, T0 + 1, P - 1));
                    all2.narrow(1, T0 + 1, P - 1).copy_(st.hist2.narrow(1, T0 + 1, P - 1));
                    break;
                }
#endif
                run.check();
                const int64_t cur = T0 + i, start = std::max<int64_t>(0, cur - M);
                at::Tensor s1, s2;
                if (use_cache && start == 0) {
                    const int64_t from = cache.len;  // tokens [from, cur) are new to the cache
                    auto [logits1, last] = decode_s1_cached(cfg_.pred, pw_, all1.slice(1, from, cur).contiguous(),
                                                            all2.slice(1, from, cur).contiguous(),
                                                            full_stamp.slice(1, from, cur).contiguous(), cache, M, path);
                    s1 = sample(logits1);
                    s2 = sample(decode_s2_cached(cfg_.pred, pw_, last, s1, cache));
#ifdef CN_WITH_CUDA
                } else if (slide && start > 0) {
                    // A full window (cur - start == M rows): the captured recompute on the window's buffers.
                    slide->win1.copy_(all1.slice(1, start, cur));
                    slide->win2.copy_(all2.slice(1, start, cur));
                    slide->wstamp.copy_(full_stamp.slice(1, start, cur));
                    slide->graph.replay();
                    s1 = slide->out1;  // copied into all1/all2 below, before the next replay
                    s2 = slide->out2;
#endif
                } else {
                    const at::Tensor in1 = all1.slice(1, start, cur).contiguous(), in2 = all2.slice(1, start, cur).contiguous();
                    const at::Tensor st = full_stamp.slice(1, start, cur).contiguous();
                    auto [logits1, context] = decode_s1(cfg_.pred, pw_, in1, in2, st, path);
                    s1 = sample(logits1.select(1, -1).contiguous());
                    const at::Tensor logits2 = decode_s2(cfg_.pred, pw_, context, s1).select(1, -1);
                    s2 = sample(logits2.contiguous());
                }
                all1.select(1, cur).copy_(s1.squeeze(-1));
                all2.select(1, cur).copy_(s2.squeeze(-1));
                run.advance(1);
            }
        }
        if (!s1_rows.empty()) {  // sampled tokens per row, for KronosTrace
            const at::Tensor g1 = all1.slice(1, T0).to(at::kCPU).contiguous(), g2 = all2.slice(1, T0).to(at::kCPU).contiguous();
            for (int64_t b = 0; b < B; ++b) {
                for (int64_t s = 0; s < S; ++s) {
                    const int64_t r = b * S + s;
                    const size_t dst = members[b] * static_cast<size_t>(S) + static_cast<size_t>(s);
                    s1_rows[dst].assign(g1.const_data_ptr<int64_t>() + r * P, g1.const_data_ptr<int64_t>() + (r + 1) * P);
                    s2_rows[dst].assign(g2.const_data_ptr<int64_t>() + r * P, g2.const_data_ptr<int64_t>() + (r + 1) * P);
                }
            }
        }
        const int64_t total = T0 + P, ws = std::max<int64_t>(0, total - M);
        if (!z_dev.defined()) {
            z_dev = tokenizer_decode(cfg_.tok, tw_, all1.slice(1, ws, total).contiguous(), all2.slice(1, ws, total).contiguous(), path);
        }
        const at::Tensor z = z_dev.to(at::kCPU, at::kFloat).contiguous();  // [N, Lw, 6]
        const int64_t Lw = z.size(1);
        const float* zp = z.const_data_ptr<float>();
        const size_t n_series = req.series.size();
        for (int64_t b = 0; b < B; ++b) {
            const Task& t = ts[members[b]];
            for (int64_t h = 0; h < P; ++h) {
                const int64_t row = Lw - P + h;
                for (size_t c = 0; c < t.series.size(); ++c) {
                    // np.mean over the samples (a non-contiguous axis): a sequential fp32 sum.
                    const float m = numpy::sequential_mean(zp + (b * S * Lw + row) * 6 + c, S, Lw * 6);
                    const float den = stdv[b * 6 + c] + static_cast<float>(1e-5);
                    const size_t series = t.series[c];
                    result[series * static_cast<size_t>(P) + h] = m * den + mean[b * 6 + c];
                    for (int64_t s = 0; s < S && paths; ++s) {
                        const float v = zp[((b * S + s) * Lw + row) * 6 + c];
                        paths[(series * static_cast<size_t>(S) + s) * static_cast<size_t>(P) + h] = v * den + mean[b * 6 + c];
                    }
                }
            }
        }
        (void)n_series;
    }

    static constexpr int32_t kMaxSamples = 4096;  // sample paths per task
    static constexpr int64_t kMaxRows = 65536;    // tasks x samples per call
    static constexpr int64_t kMaxHistory = 1 << 16;         // bars of one task's history
    static constexpr int64_t kMaxTokenRows = int64_t{1} << 20;  // sum over tasks of sample_count x window
    static constexpr float kMinTemperature = 1e-6f;

    // Graph mode captures the cached step, valid while the window does not slide; one step needs no graph. The
    // step's attention kernel holds up to 8192 cache rows of head dim <= 256 (kernels/kv_cache.h).
    // The window slides during the call: steps from history + 1 - max_context on recompute a full window.
    bool slides(int64_t T0, int64_t P) const { return T0 + P - 1 > cfg_.pred.max_context; }
    bool graphable(int64_t T0, int64_t P) const {
        const int64_t d = cfg_.pred.d_model, heads = std::min<int64_t>(cfg_.pred.n_heads, pw_.dep_heads);
        return T0 + P - 1 <= cfg_.pred.max_context && P >= 2 && cfg_.pred.max_context <= 8192 && d / heads <= 256;
    }

    KronosConfig cfg_;
    TokenizerWeights tw_;
    PredictorWeights pw_;
#ifdef CN_WITH_CUDA
    std::unique_ptr<KronosGraphs> graphs_;  // declared after the weights it replays: destroyed first
    bool use_graphs_ = false;               // this call's choice; written and read under graphs_->mu()
    bool use_ends_ = false;                 // likewise: prologue/epilogue graphs too
    bool use_sliding_ = false;              // likewise: full-window steps from sliding entries
#endif
};

}  // namespace

void forecast_traced(Model& model, const ForecastRequest& req, RunContext& run, float* out, size_t out_count,
                     KronosTrace* trace) {
    auto* k = dynamic_cast<KronosModel*>(&model);
    if (!k) fail(Status::kInvalidArgument, "forecast_traced: not a Kronos model");
    Model::CallScope scope(model);
    k->forecast_impl(req, run, out, out_count, nullptr, 0, trace);
}

std::unique_ptr<Model> load_kronos(const std::string& dir, const format::ModelConfig& config, const ModelOptions& options) {
    // fp32 is the reference's precision (exact); bf16 runs the same networks with bf16 weights and activations
    // (RoPE angles in fp32 with bf16 tables; norms and attention in bf16) and samples in fp32.
    if (options.dtype != c10::kFloat && options.dtype != c10::kBFloat16) {
        fail(Status::kUnsupported, "Kronos runs in fp32 or bf16 (f16 is not supported)");
    }
    const KronosConfig c = parse_kronos_config(config, dir);
    const WeightLoadOptions wo{options.device, options.dtype, options.mmap_weights, options.check_tensors};
    // Tokenizer.
    auto tck = format::Checkpoint::open(dir + "/tokenizer");
    Weights tw(tck, wo);
    allow_extras(tw, *tck);
    Loader tl{tw, tck, options.device};
    const TokenizerConfig& k = c.tok;
    tl.lin("embed", k.d_model, k.d_in);
    tl.lin("head", k.d_in, k.d_model);
    tl.lin("quant_embed", k.s1_bits + k.s2_bits, k.d_model);
    tl.lin("post_quant_embed", k.d_model, k.s1_bits + k.s2_bits);
    for (int64_t i = 0; i < k.enc_blocks; ++i) tl.expect_block("encoder." + std::to_string(i), k.d_model, k.ff_dim);
    for (int64_t i = 0; i < k.dec_blocks; ++i) tl.expect_block("decoder." + std::to_string(i), k.d_model, k.ff_dim);
    tw.validate();
    TokenizerWeights tok;
    tok.embed = tl.L("embed");
    tok.head = tl.L("head");
    tok.quant_embed = tl.L("quant_embed");
    tok.post_quant_embed = tl.L("post_quant_embed");
    const bool fused = options.device.is_cuda();  // fused GEMMs for the kernels path (kronos_forward.h's Path)
    for (int64_t i = 0; i < k.enc_blocks; ++i) tok.encoder.push_back(tl.block("encoder." + std::to_string(i), k.n_heads, k.d_model, fused));
    for (int64_t i = 0; i < k.dec_blocks; ++i) tok.decoder.push_back(tl.block("decoder." + std::to_string(i), k.n_heads, k.d_model, fused));

    // Predictor.
    auto pck = format::Checkpoint::open(dir);
    Weights pw(pck, wo);
    allow_extras(pw, *pck);
    Loader pl{pw, pck, options.device};
    const PredictorConfig& p = c.pred;
    const int64_t d = p.d_model, V1 = int64_t{1} << p.s1_bits, V2 = int64_t{1} << p.s2_bits;
    pw.expect("embedding.emb_s1.weight", {V1, d});
    pw.expect("embedding.emb_s2.weight", {V2, d});
    pl.lin("embedding.fusion_proj", d, 2 * d);
    pw.expect("time_emb.minute_embed.weight", {60, d});
    pw.expect("time_emb.hour_embed.weight", {24, d});
    pw.expect("time_emb.weekday_embed.weight", {7, d});
    pw.expect("time_emb.day_embed.weight", {32, d});
    pw.expect("time_emb.month_embed.weight", {13, d});
    for (int64_t i = 0; i < p.n_layers; ++i) pl.expect_block("transformer." + std::to_string(i), d, p.ff_dim);
    pw.expect("norm.weight", {d});
    for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) pl.lin(std::string("dep_layer.cross_attn.") + n, d, d);
    pw.expect("dep_layer.norm.weight", {d});
    pl.lin("head.proj_s1", V1, d);
    pl.lin("head.proj_s2", V2, d);
    pw.validate();
    PredictorWeights pr;
    pr.emb_s1 = pw.load("embedding.emb_s1.weight");
    pr.emb_s2 = pw.load("embedding.emb_s2.weight");
    pr.fusion = pl.L("embedding.fusion_proj");
    pr.minute = pw.load("time_emb.minute_embed.weight");
    pr.hour = pw.load("time_emb.hour_embed.weight");
    pr.weekday = pw.load("time_emb.weekday_embed.weight");
    pr.day = pw.load("time_emb.day_embed.weight");
    pr.month = pw.load("time_emb.month_embed.weight");
    for (int64_t i = 0; i < p.n_layers; ++i) pr.blocks.push_back(pl.block("transformer." + std::to_string(i), p.n_heads, d, fused));
    pr.norm = pw.load("norm.weight");
    pr.dep_q = pl.L("dep_layer.cross_attn.q_proj");
    pr.dep_k = pl.L("dep_layer.cross_attn.k_proj");
    pr.dep_v = pl.L("dep_layer.cross_attn.v_proj");
    if (fused) pr.dep_kv = fuse({&pr.dep_k, &pr.dep_v});
    pr.dep_o = pl.L("dep_layer.cross_attn.out_proj");
    pr.dep_norm = pw.load("dep_layer.norm.weight");
    pr.dep_heads = p.dep_heads;
    pr.dep_inv_freq = pl.inv_freq("dep_layer.cross_attn.rotary.inv_freq", d / p.dep_heads);
    pr.proj_s1 = pl.L("head.proj_s1");
    pr.proj_s2 = pl.L("head.proj_s2");
    return std::make_unique<KronosModel>(options, config.json(), c, std::move(tok), std::move(pr),
                                         tw.expected_elements() + pw.expected_elements());
}

}  // namespace cn::kronos
