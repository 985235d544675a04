#include "core/models/chronos2/chronos2_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/record_function.h>

#include "core/common/status.h"
#include "core/models/chronos2/chronos2_covariates.h"
#include "core/models/chronos2/chronos2_graphs.h"
#include "core/runtime/host_copy.h"
#include "core/runtime/quantiles.h"
#include "core/runtime/stream_lanes.h"

namespace cn::chronos2 {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The reference's default levels for the long-horizon rollout.
const std::vector<float> kUnrolledQuantiles = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};

// The largest group-attention mask one forward pass may build: rows^2 x tokens elements (1 GiB in fp32).
constexpr int64_t kMaxGroupMask = int64_t{1} << 28;

// The fewest rows a piece of a batch split over lanes may have: on the H100, fused bf16 at B = 256 (two pieces of
// 128 series) gained ~10 %, at B = 64 (two of 32) it lost (docs/benchmarks.md, #19 sixth step). Only a call of fewer
// batches than lanes splits them: with as many batches as lanes, whole batches run faster (B = 1024, four batches of
// 256 series: 14.0 ms against 14.7-14.9 in eight pieces of 128; #19 eighth step).
constexpr int64_t kMinPieceRows = 128;

// Merged passes (CN_CHRONOS2_MERGE=1; off by default): with lanes and at least as many batches as lanes, consecutive
// batches of univariate single-row tasks with one context length run as one pass of up to kMaxPassRows rows (a power
// of two, as the graphs' row buckets are; at most the call's rows over the lanes), which gives each series the bits
// it gets in its own batch (the same L, batch invariance). Measured on the H100 (#19 eighth and ninth steps): one call
// of 3136 series 40.3 against 41.8 ms in fused bf16 in one lease, 41.8-42.1 in the next; B=1024 within the spread in
// bf16 and 2-7 % slower in f32; outputs bit-identical. Not the default.
constexpr int64_t kMaxPassRows = 512;
bool merge_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("CN_CHRONOS2_MERGE");
        return v && std::string(v) == "1";
    }();
    return on;
}

[[noreturn]] void invalid(const std::string& msg) { fail(Status::kInvalidArgument, msg); }

// One task: its target series (request indices) and rows [targets | past-only covariates | known-future
// covariates], each row `length` long (left-padded with NaN where a series is shorter) plus `horizon`
// future values (NaN for targets and past-only covariates).
struct Task {
    std::vector<size_t> targets;
    std::vector<const ForecastCovariate*> past_only, known_future;
    int64_t rows() const { return static_cast<int64_t>(targets.size() + past_only.size() + known_future.size()); }
};

// The context steps of a task that reach the model: its longest target's, at most the context length.
int64_t task_length(const Chronos2Config& cfg, const ForecastRequest& req, const Task& t) {
    size_t length = 0;
    for (size_t s : t.targets) length = std::max(length, req.series[s].values.size());
    return std::min<int64_t>(static_cast<int64_t>(length), cfg.context_length);
}

std::vector<Task> make_tasks(const ForecastRequest& req) {
    std::vector<Task> tasks;
    std::map<int64_t, size_t> by_group;  // group id -> task index
    std::vector<size_t> task_of(req.series.size());
    for (size_t i = 0; i < req.series.size(); ++i) {
        const int64_t g = req.series[i].group;
        if (g >= 0) {
            auto it = by_group.find(g);
            if (it != by_group.end()) {
                tasks[it->second].targets.push_back(i);
                task_of[i] = it->second;
                continue;
            }
            by_group.emplace(g, tasks.size());
        }
        task_of[i] = tasks.size();
        tasks.push_back(Task{{i}, {}, {}});
    }
    for (const auto& c : req.covariates) {
        Task& t = tasks[task_of[c.series_index]];
        (c.future_length() > 0 ? t.known_future : t.past_only).push_back(&c);
    }
    return tasks;
}

// What a scan of values found: an infinity, a number (neither NaN nor infinite).
struct ValueScan {
    bool inf = false, number = false;
};

// Compares bit patterns (|x| == inf, |x| < inf) in blocks of 64 with no early exit, so the compiler vectorises the
// loop at -O2 (3.5x the branchy isinf/isnan loop: 0.8 ms per 1024 series of 512 values on the H100 machine's host
// before); only a failed check looks for the position, for the message.
ValueScan scan_values(const float* p, size_t n) {
    constexpr uint32_t kAbs = 0x7fffffffu, kInf = 0x7f800000u;
    uint32_t inf = 0, number = 0;
    auto one = [&](size_t k, uint32_t& i, uint32_t& num) {
        uint32_t b;
        std::memcpy(&b, p + k, sizeof(b));
        b &= kAbs;
        i |= static_cast<uint32_t>(b == kInf);
        num |= static_cast<uint32_t>(b < kInf);
    };
    size_t k = 0;
    for (; k + 64 <= n; k += 64) {
        uint32_t i = 0, num = 0;
        for (size_t j = 0; j < 64; ++j) one(k + j, i, num);
        inf |= i;
        number |= num;
    }
    for (; k < n; ++k) one(k, inf, number);
    return {inf != 0, number != 0};
}

size_t first_inf(const SeriesValues& v) {
    return static_cast<size_t>(std::find_if(v.begin(), v.end(), [](float x) { return std::isinf(x); }) - v.begin());
}

// A series' values: no infinity, at least one number. Run on each piece's series just before the piece is prepared
// (forecast() below), so the device starts on the first piece while the host scans the rest: a request with a bad
// value fails with the same status and message, after the pieces before it ran (what `out` holds then is
// unspecified, as after a cancellation).
void check_series_values(const ForecastRequest& req, size_t i) {
    const SeriesValues& v = req.series[i].values;
    const ValueScan scan = scan_values(v.data(), v.size());
    if (scan.inf) invalid("series[" + std::to_string(i) + "]: value " + std::to_string(first_inf(v)) + " is infinite");
    if (!scan.number) invalid("series[" + std::to_string(i) + "]: every value is NaN (missing)");
}

// The checks before anything runs: empty series, covariates (which make_tasks needs in range) and quantile levels.
// The structural ones (series present, horizon in range) are forecast_shape's, the series' values
// check_series_values'.
void validate(const ForecastRequest& req) {
    for (size_t i = 0; i < req.series.size(); ++i) {
        if (req.series[i].values.empty()) invalid("series[" + std::to_string(i) + "]: empty");
    }
    for (size_t c = 0; c < req.covariates.size(); ++c) {
        const auto& cov = req.covariates[c];
        const std::string at = "covariates[" + std::to_string(c) + "]";
        if (cov.series_index >= req.series.size()) invalid(at + ": series_index out of range");
        if (cov.past_length() != req.series[cov.series_index].values.size()) {
            invalid(at + ": past length " + std::to_string(cov.past_length()) + " differs from its series' " +
                    std::to_string(req.series[cov.series_index].values.size()));
        }
        if (static_cast<int64_t>(cov.future_length()) > req.horizon) {
            invalid(at + ": " + std::to_string(cov.future_length()) + " future values exceed the horizon of " +
                    std::to_string(req.horizon));
        }
        if (scan_values(cov.past.data(), cov.past.size()).inf) invalid(at + ": past value is infinite");
        if (scan_values(cov.future.data(), cov.future.size()).inf) invalid(at + ": future value is infinite");
    }
    for (float q : req.quantiles) {
        if (!(q > 0.0f && q < 1.0f)) invalid("quantiles: levels must lie in (0, 1)");
    }
}

// Ordinal categories per categorical covariate: the union over the same covariate (same position among
// the task's categorical covariates, in row order) of every task in the request, as the reference takes
// them over all tasks of a call (which must share one schema).
using CategoryMap = std::map<const ForecastCovariate*, const std::vector<std::string>*>;

struct Categories {
    std::vector<std::vector<std::string>> by_position;
    CategoryMap of;
};

Categories collect_all_categories(const std::vector<Task>& tasks) {
    Categories c;
    for (const auto& t : tasks) {
        size_t j = 0;
        for (const auto* group : {&t.past_only, &t.known_future}) {
            for (const auto* cov : *group) {
                if (!cov->categorical) continue;
                if (c.by_position.size() <= j) c.by_position.resize(j + 1);
                collect_categories(cov->past_labels, c.by_position[j]);
                ++j;
            }
        }
    }
    for (const auto& t : tasks) {
        size_t j = 0;
        for (const auto* group : {&t.past_only, &t.known_future}) {
            for (const auto* cov : *group) {
                if (cov->categorical) c.of[cov] = &c.by_position[j++];
            }
        }
    }
    return c;
}

// Writes a task's rows [targets | past-only covariates | known-future covariates] into a batch's buffers, which
// hold NaN: `ctx` [rows, L] (each row ends at the last column, shorter rows left-padded with NaN; only the last L
// <= context_length steps are copied, as the reference truncates, while categorical encodings still see the whole
// history) and `fut` [rows, H]. L is the batch's longest task_length (the reference left-pads a batch to it).
void fill_task(const ForecastRequest& req, const Task& t, const Categories& cats, float* ctx, int64_t L, float* fut) {
    const int64_t H = req.horizon;
    int64_t r = 0;
    auto put_past = [&](const auto& v) {  // a SeriesValues or a std::vector<float>
        const int64_t take = std::min<int64_t>(static_cast<int64_t>(v.size()), L);
        std::copy(v.end() - take, v.end(), ctx + r * L + (L - take));
    };
    for (size_t s : t.targets) {
        put_past(req.series[s].values);
        ++r;
    }
    const SeriesValues& first_target = req.series[t.targets.front()].values;
    auto put_cov = [&](const ForecastCovariate* cov) {
        if (cov->categorical) {
            const EncodedCovariate e = t.targets.size() == 1 ? target_encode(cov->past_labels, cov->future_labels, first_target.data())
                                                             : ordinal_encode(cov->past_labels, cov->future_labels, *cats.of.at(cov));
            put_past(e.past);
            std::copy(e.future.begin(), e.future.end(), fut + r * H);
        } else {
            put_past(cov->past);
            std::copy(cov->future.begin(), cov->future.end(), fut + r * H);
        }
        ++r;
    };
    for (const auto* cov : t.past_only) put_cov(cov);
    for (const auto* cov : t.known_future) put_cov(cov);
}

// Pads (NaN) or trims future covariates to `width` steps; undefined when nothing is known.
at::Tensor step_future(const at::Tensor& fc, int64_t width) {
    at::Tensor f = fc;
    if (f.size(1) < width)
        f = at::cat({f, at::full({f.size(0), width - f.size(1)}, kNaN, f.options())}, 1);
    else
        f = f.slice(1, 0, width);
    return f;
}

bool all_nan(const at::Tensor& t) { return t.numel() == 0 || at::isnan(t).all().item<bool>(); }

// The reference's _predict_batch: [rows, Q, H] fp32 on the device. The inputs are the batch's host tensors
// (page-locked on CUDA): a graph replay copies them straight into its static buffers, any other pass (and the
// long-horizon rollout) takes device copies, made asynchronously. `future_known`: whether `future` holds any value
// (checked on the host; when it holds none, no step checks it).
at::Tensor predict_batch(const Chronos2Config& cfg, const Chronos2Weights& w, const PipelineOptions& opt, const at::Tensor& context,
                         const at::Tensor& group_ids, const at::Tensor& future, bool future_known, int64_t H, bool singleton, int lane,
                         RunContext& run) {
    const int64_t p = cfg.patch_size;
    const at::Device dev = opt.device;
    auto on_device = [&](const at::Tensor& t) { return t.defined() ? t.to(dev, /*non_blocking=*/true) : t; };
    auto n_patches = [&](int64_t remaining) { return std::min((remaining + p - 1) / p, cfg.max_output_patches); };
    auto step = [&](const at::Tensor& ctx, const at::Tensor& gid, const at::Tensor& fc, int64_t N) {
        at::Tensor f = step_future(fc, N * p);
        if (!future_known || all_nan(f)) f = at::Tensor();  // identical to NaN-filled covariates, cheaper
        if (opt.graphs) return opt.graphs->run(ctx, gid, f, N, singleton, lane);
        return (opt.fused ? forward_fused : forward)(cfg, w, opt.dtype, on_device(ctx), on_device(gid), on_device(f), N, singleton);
    };

    int64_t remaining = H;
    at::Tensor pred = step(context, group_ids, future, n_patches(remaining));
    if (pred.size(-1) >= H) return pred.slice(-1, 0, H).contiguous();  // one step: no concatenation (a device copy)
    std::vector<at::Tensor> preds{pred};
    remaining -= pred.size(-1);
    {
        // Long horizon: expand every row into paths that follow the unrolled quantile levels.
        std::vector<float> model_q(cfg.quantiles.begin(), cfg.quantiles.end());
        for (float u : kUnrolledQuantiles) {
            if (std::find(model_q.begin(), model_q.end(), u) == model_q.end()) {
                fail(Status::kUnsupported, "horizon: forecasting past the native horizon (" + std::to_string(cfg.native_horizon()) +
                                               ") needs the levels 0.1..0.9 among the model's quantiles");
            }
        }
        const at::Tensor unrolled = at::tensor(kUnrolledQuantiles, at::kFloat);
        const at::Tensor model_levels = at::tensor(model_q, at::kFloat);
        const int64_t n = unrolled.size(0);
        const int64_t B = context.size(0);
        const at::Tensor weights = at::outer(quantile_prob_mass(unrolled), quantile_prob_mass(model_levels)).reshape({-1});
        const at::Tensor context_d = on_device(context), future_d = on_device(future), group_ids_d = on_device(group_ids);
        at::Tensor ctx = context_d.unsqueeze(1).expand({B, n, context_d.size(1)});
        at::Tensor fc = future_d.unsqueeze(1).expand({B, n, future_d.size(1)});
        const at::Tensor gid = (group_ids_d.view({B, 1}) * n + at::arange(n, group_ids_d.options()).view({1, n})).reshape({-1});
        while (remaining > 0) {
            run.check();
            const int64_t N = n_patches(remaining);
            const int64_t h = pred.size(-1);
            at::Tensor paths = interpolate_quantiles(unrolled, model_levels, pred.transpose(1, 2));  // [B, h, n]
            ctx = at::cat({ctx, paths.transpose(1, 2)}, -1);
            ctx = ctx.slice(-1, std::max<int64_t>(0, ctx.size(-1) - cfg.context_length));
            // Known future covariate values replace what was just predicted for them.
            const at::Tensor known = fc.slice(-1, 0, h);
            ctx.slice(-1, ctx.size(-1) - h).copy_(at::where(at::isnan(known), ctx.slice(-1, ctx.size(-1) - h), known));
            fc = fc.slice(-1, h);
            at::Tensor out = step(ctx.reshape({B * n, ctx.size(-1)}), gid, fc.reshape({B * n, fc.size(-1)}), N);
            const int64_t Q = out.size(1), hh = out.size(2);
            out = out.view({B, n * Q, hh});
            pred = weighted_quantile(model_levels.to(dev), weights.to(dev), out.transpose(1, 2)).transpose(1, 2);
            preds.push_back(pred);
            remaining -= hh;
        }
    }
    return at::cat(preds, -1).slice(-1, 0, H);
}

// How requested levels map onto the model's: a plain selection when every level is one of the model's
// (compared in float32), linear interpolation otherwise.
struct QuantileMap {
    bool subset = true;
    bool identity = false;  // the model's own levels, in order: the predictions as they are
    std::vector<int64_t> index;
    at::Tensor query;
};

QuantileMap map_quantiles(const Chronos2Config& cfg, const ForecastRequest& req) {
    QuantileMap m;
    std::vector<float> model_q(cfg.quantiles.begin(), cfg.quantiles.end());
    if (req.quantiles.empty()) {
        for (size_t i = 0; i < model_q.size(); ++i) m.index.push_back(static_cast<int64_t>(i));
        m.identity = true;
        return m;
    }
    for (float q : req.quantiles) {
        auto it = std::find(model_q.begin(), model_q.end(), q);
        if (it == model_q.end())
            m.subset = false;
        else
            m.index.push_back(it - model_q.begin());
    }
    if (!m.subset) m.query = at::tensor(req.quantiles, at::kFloat);
    m.identity = m.subset && m.index.size() == model_q.size();
    for (size_t i = 0; m.identity && i < m.index.size(); ++i) m.identity = m.index[i] == static_cast<int64_t>(i);
    return m;
}

}  // namespace

ForecastShape forecast_shape(const Chronos2Config& cfg, const PipelineOptions& opt, const ForecastRequest& req) {
    if (req.horizon < 1) invalid("horizon: not set (must be >= 1)");
    if (req.horizon > opt.max_horizon) {
        invalid("horizon: " + std::to_string(req.horizon) + " exceeds this model's limit of " + std::to_string(opt.max_horizon));
    }
    if (req.series.empty()) invalid("series: the request has no series");
    ForecastShape s;
    s.n_series = req.series.size();
    s.n_outputs = req.quantiles.empty() ? cfg.quantiles.size() : req.quantiles.size();
    s.horizon = static_cast<uint64_t>(req.horizon);
    return s;
}

void forecast(const Chronos2Config& cfg, const Chronos2Weights& w, const PipelineOptions& opt, const ForecastRequest& req, RunContext& run,
              float* out, size_t out_count) {
    const ForecastShape shape = forecast_shape(cfg, opt, req);
    if (out_count < shape.n_values()) {
        invalid("out: buffer holds " + std::to_string(out_count) + " floats, the forecast needs " + std::to_string(shape.n_values()));
    }
    {
        RECORD_FUNCTION("cn::chronos2::validate", c10::ArrayRef<const c10::IValue>{});
        validate(req);
    }
    const std::vector<Task> tasks = make_tasks(req);
    const Categories categories = collect_all_categories(tasks);
    const QuantileMap qmap = map_quantiles(cfg, req);
    const at::Tensor model_levels =
        qmap.subset ? at::Tensor() : at::tensor(std::vector<float>(cfg.quantiles.begin(), cfg.quantiles.end()), at::kFloat);
    const int64_t H = req.horizon;
    const int64_t nq = static_cast<int64_t>(shape.n_outputs);

    // Batches of whole tasks, as the reference's sequential batching: add tasks while rows < batch_rows. Group
    // attention (any task of more than one row) builds an additive mask over the batch's rows squared at every
    // token: a batch stops growing before that mask would pass kMaxGroupMask elements, and a task that alone
    // passes it is refused (a rollout multiplies the rows by the unrolled paths).
    const int64_t tokens = (cfg.context_length + cfg.patch_size - 1) / cfg.patch_size + 1 + cfg.max_output_patches;
    const int64_t paths = H > cfg.native_horizon() ? static_cast<int64_t>(kUnrolledQuantiles.size()) : 1;
    auto mask_fits = [&](int64_t rows, bool grouped) {
        const int64_t r = rows * paths;
        return !grouped || (r <= kMaxGroupMask / r / tokens);
    };
    std::vector<std::pair<size_t, size_t>> batches;
    for (size_t i = 0; i < tasks.size();) {
        const size_t start = i;
        int64_t rows = 0;
        bool grouped = false;
        while (i < tasks.size() && rows < opt.batch_rows) {
            const int64_t r = tasks[i].rows();
            if (i > start && !mask_fits(rows + r, grouped || r > 1)) break;
            rows += r;
            grouped = grouped || r > 1;
            ++i;
        }
        if (!mask_fits(rows, grouped)) {
            invalid("task of series[" + std::to_string(tasks[start].targets.front()) + "]: " + std::to_string(tasks[start].rows()) +
                    " rows (targets and covariates) attend to each other over " + std::to_string(rows * paths) + " rows x " +
                    std::to_string(tokens) + " tokens, above the library's limit of " + std::to_string(kMaxGroupMask) +
                    " mask elements; give smaller groups or fewer covariates" +
                    (paths > 1 ? std::string(", or a horizon within the native ") + std::to_string(cfg.native_horizon()) : std::string()));
        }
        batches.emplace_back(start, i);
    }
    // What runs as one pass: each batch whole, or (lanes, and a call of fewer batches than lanes) a batch of
    // univariate tasks split into min(rows / kMinPieceRows, lanes) pieces, rows as even as whole tasks allow. A piece
    // keeps its batch's context length L (the reference left-pads a batch to its longest task) and holds single-row
    // tasks whose passes have no groups (no rollout paths either), so each of its series gets the bits it gets in the
    // whole batch (batch invariance); a batch with groups runs whole, as their attention's sums span the batch.
    // Pieces go to the lanes in turn, whole batches too.
    struct Piece {
        size_t begin, end;
        int64_t L;
    };
    const int n_lanes = opt.graphs && opt.lanes && opt.lanes->size() > 1 ? opt.lanes->size() : 1;
    const bool split = static_cast<int64_t>(batches.size()) < n_lanes;
    int64_t merge_rows = 0;  // the most rows of a merged pass; 0: no merging
    if (!split && n_lanes > 1 && merge_enabled()) {
        int64_t all_rows = 0;
        for (const Task& t : tasks) all_rows += t.rows();
        while (merge_rows * 2 <= std::min(all_rows / n_lanes, kMaxPassRows)) merge_rows = merge_rows ? merge_rows * 2 : 1;
    }
    int64_t last_rows = 0;     // rows of pieces.back() when it may take the next batch
    bool last_merges = false;  // whether it may
    std::vector<Piece> pieces;
    for (const auto& [begin, end] : batches) {
        int64_t L = 0, rows = 0;
        bool single_rows = paths == 1;
        for (size_t t = begin; t < end; ++t) {
            L = std::max(L, task_length(cfg, req, tasks[t]));
            rows += tasks[t].rows();
            single_rows = single_rows && tasks[t].rows() == 1;
        }
        const int64_t parts = split && single_rows ? std::clamp<int64_t>(rows / kMinPieceRows, 1, n_lanes) : 1;
        const bool merges = merge_rows > 0 && single_rows && parts == 1;
        if (merges && last_merges && pieces.back().L == L && last_rows + rows <= merge_rows) {
            pieces.back().end = end;
            last_rows += rows;
            continue;
        }
        last_merges = merges;
        last_rows = rows;
        size_t start = begin;
        int64_t done = 0;
        for (int64_t part = 1; part < parts; ++part) {
            // Close the piece at the first task boundary at or past part / parts of the batch's rows.
            size_t t = start;
            while (t < end && done * parts < rows * part) done += tasks[t++].rows();
            if (t > start && t < end) {
                pieces.push_back({start, t, L});
                start = t;
            }
        }
        pieces.push_back({start, end, L});
    }
    run.set_total(pieces.size());

    // The batch's rows, written straight into its two host buffers (no per-task tensors).
    struct HostBatch {
        at::Tensor context, future, group_ids;  // [rows, L], [rows, H] fp32 and [rows] int64, on the host
        bool future_known = false, singleton = true;
    };
    auto prepare_batch = [&](const Piece& piece) {
        RECORD_FUNCTION("cn::chronos2::prepare_batch", c10::ArrayRef<const c10::IValue>{});
        const auto [begin, end, L] = piece;
        HostBatch hb;
        int64_t rows = 0;
        std::vector<int64_t> gids;
        for (size_t t = begin; t < end; ++t) {
            const int64_t r = tasks[t].rows();
            hb.singleton = hb.singleton && r == 1;
            for (int64_t k = 0; k < r; ++k) gids.push_back(static_cast<int64_t>(t - begin));
            rows += r;
        }
        // NaN-filled by a plain loop on this thread: ATen's fill_ on page-locked buffers cost ~1 ms per batch of 256
        // series on the H100 machine (torch.profiler, docs/benchmarks.md), more than the batch's GPU time at B=1.
        hb.context = at::empty({rows, L}, host_options(opt.device));
        hb.future = at::empty({rows, H}, host_options(opt.device));
        float* const ctx = hb.context.data_ptr<float>();
        float* const fut = hb.future.data_ptr<float>();
        std::fill_n(ctx, rows * L, kNaN);
        std::fill_n(fut, rows * H, kNaN);
        for (size_t t = begin, row = 0; t < end; row += static_cast<size_t>(tasks[t].rows()), ++t) {
            fill_task(req, tasks[t], categories, ctx + static_cast<int64_t>(row) * L, L, fut + static_cast<int64_t>(row) * H);
        }
        hb.future_known = !std::all_of(fut, fut + rows * H, [](float v) { return std::isnan(v); });
        hb.group_ids = at::empty({rows}, host_options(opt.device).dtype(at::kLong));
        std::copy(gids.begin(), gids.end(), hb.group_ids.data_ptr<int64_t>());
        return hb;
    };
    // Queues the batch's pass on the device and the copy of its predictions [rows, Q, H] back to the host (neither
    // waited for: the inputs are page-locked, their copies asynchronous).
    auto launch_batch = [&](const HostBatch& hb, int lane) {
        RECORD_FUNCTION("cn::chronos2::launch_batch", c10::ArrayRef<const c10::IValue>{});
        return DeviceToHost(predict_batch(cfg, w, opt, hb.context, hb.group_ids, hb.future, hb.future_known, H, hb.singleton, lane, run));
    };
    // Waits for a batch's predictions, selects or interpolates the requested levels ([rows, nq, H]) and writes its
    // targets' rows into `out`.
    auto finish_batch = [&](DeviceToHost& back, size_t begin, size_t end) {
        at::Tensor pred = back.wait();
        RECORD_FUNCTION("cn::chronos2::finish_batch", c10::ArrayRef<const c10::IValue>{});
        if (qmap.identity) {
            // as predicted
        } else if (qmap.subset) {
            pred = pred.index_select(1, at::tensor(qmap.index, at::kLong));
        } else {
            pred = interpolate_quantiles(qmap.query, model_levels, pred.transpose(1, 2)).transpose(1, 2);
        }
        pred = pred.contiguous();
        const float* src = pred.data_ptr<float>();
        int64_t row = 0;
        for (size_t t = begin; t < end; ++t) {
            const std::vector<size_t>& targets = tasks[t].targets;
            for (size_t k = 0; k < targets.size(); ++k) {
                const int64_t r = row + static_cast<int64_t>(k);
                std::copy(src + r * nq * H, src + (r + 1) * nq * H, out + targets[k] * nq * H);
            }
            row += tasks[t].rows();
        }
        run.advance();
    };
    // One piece more in flight than there are lanes: while the device runs piece k (and, with lanes, the pieces
    // queued on the other lanes beside it), the host prepares piece k + 1 and queues it on its lane, then waits for
    // the oldest piece's results alone (their copy runs on a side stream) and writes them out; the device never
    // waits for the host between pieces.
    struct Pending {
        DeviceToHost back;
        size_t begin, end;
    };
    // A call of one piece has nothing to run beside it: it stays on the caller's stream, as without lanes.
    const size_t in_lanes = pieces.size() > 1 ? static_cast<size_t>(n_lanes) : 1;
    std::deque<Pending> pending;
    if (in_lanes > 1) opt.lanes->follow_current();
    for (size_t k = 0; k < pieces.size(); ++k) {
        run.check();
        {
            RECORD_FUNCTION("cn::chronos2::check_values", c10::ArrayRef<const c10::IValue>{});
            for (size_t t = pieces[k].begin; t < pieces[k].end; ++t) {
                for (size_t s : tasks[t].targets) check_series_values(req, s);
            }
        }
        const HostBatch hb = prepare_batch(pieces[k]);
        {
            // Graphs are keyed by lane, -1 for the caller's stream: each graph is replayed on one stream only.
            const size_t lane = k % in_lanes;
            const StreamLanes::Guard on_lane(in_lanes > 1 ? opt.lanes : nullptr, lane);
            pending.push_back({launch_batch(hb, in_lanes > 1 ? static_cast<int>(lane) : -1), pieces[k].begin, pieces[k].end});
        }
        while (pending.size() > in_lanes) {
            finish_batch(pending.front().back, pending.front().begin, pending.front().end);
            pending.pop_front();
        }
    }
    for (Pending& p : pending) finish_batch(p.back, p.begin, p.end);
}

}  // namespace cn::chronos2
