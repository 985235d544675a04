// The Toto Model subclass (toto_model.h): the info it reports and a forecast call as plan -> batches -> outputs.
#include "core/models/toto/toto_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <mutex>

#include "core/common/status.h"
#include "core/models/toto/toto_config.h"
#include "core/models/toto/toto_graphs.h"
#include "core/models/toto/toto_pipeline.h"
#include "core/models/toto/toto_weights.h"

namespace cn::toto {
namespace {

// A generator seeded as torch.manual_seed(seed) seeds the device's default one (the CPU's keys mt19937 on the
// seed's low 32 bits, as the reference's).
at::Generator make_generator(c10::Device device, uint64_t seed) {
    if (device.is_cpu()) return at::make_generator<at::CPUGeneratorImpl>(seed);
    at::Generator def = at::globalContext().defaultGenerator(device);  // a handle to the shared one
    at::Generator g;
    {
        std::lock_guard<std::mutex> lock(def.mutex());  // other threads' ops advance the default generator
        g = def.clone();
    }
    g.set_current_seed(seed);
    return g;
}

class TotoModel final : public Model {
public:
    TotoModel(ModelOptions options, nlohmann::json config, TotoConfig cfg, TotoWeights w)
        : Model(options, std::move(config)), cfg_(std::move(cfg)), w_(std::move(w)), rot_(make_rotary(cfg_.head_dim(), options.device)) {
        n_parameters_ = w_.n_parameters;
        weight_bytes_ = w_.n_parameters * c10::elementSize(options.dtype);
    }

    cn_model_kind kind() const override { return CN_MODEL_KIND_TOTO; }

protected:
    // Eager: the reference's algorithm. Fused: the prefill once per series for all its sample copies (every
    // device); the draws are eager's. Graph (CUDA): fused, with each sample batch's rollout a replay of a captured
    // graph (toto_graphs.h); its forecasts are fused mode's.
    void apply_mode(cn_mode mode) override {
        if (mode == CN_MODE_GRAPH && !options_.device.is_cuda()) Model::apply_mode(mode);  // UNSUPPORTED
        if (mode != CN_MODE_FUSED && mode != CN_MODE_GRAPH) Model::apply_mode(mode);
        graphs_ = mode == CN_MODE_GRAPH ? TotoGraphs::create(options_.device, make_generator(options_.device, 0)) : nullptr;
    }

    MemoryUse memory_use() const override {
        MemoryUse m{weight_bytes_, 0, 0};
        if (graphs_) m.graph_pool_bytes = graphs_->pool_bytes();
        return m;
    }

public:
    void fill_info(cn_model_info& info) const override {
        Model::fill_info(info);
        // History and horizon share kMaxSteps, each rounded up to whole patches; the history is never truncated.
        info.context_length = kMaxSteps - cfg_.patch_size;
        info.native_horizon = cfg_.patch_size;
        info.max_horizon = kMaxSteps - cfg_.patch_size;
        info.n_default_quantiles = static_cast<int64_t>(default_quantiles().size());
    }

    std::vector<float> quantiles() const override { return default_quantiles(); }

    ForecastShape forecast_shape(const ForecastRequest& req) const override {
        const Plan p = make_plan(req, cfg_);
        ForecastShape s;
        s.n_series = req.series.size();
        s.n_outputs = static_cast<uint64_t>(n_outputs(p));
        s.horizon = static_cast<uint64_t>(req.horizon);
        s.n_samples = static_cast<uint64_t>(p.sample_count);
        return s;
    }

    void forecast(const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples,
                  size_t samples_count) override {
        forecast_impl(req, run, out, out_count, samples, samples_count, nullptr);
    }

    void forecast_impl(const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples, size_t samples_count,
                       Trace* trace) const {
        const Plan plan = make_plan(req, cfg_);
        const int64_t H = req.horizon;
        const uint64_t n_values = req.series.size() * static_cast<uint64_t>(n_outputs(plan) * H);
        if (out_count < n_values) {
            fail(Status::kInvalidArgument,
                 "out_count: " + std::to_string(out_count) + " floats, the forecast needs " + std::to_string(n_values));
        }
        if (samples && plan.sample_count == 0) {
            fail(Status::kInvalidArgument, "samples: the mean rollout draws no samples; pass NULL and 0");
        }
        const uint64_t n_sample_values = req.series.size() * static_cast<uint64_t>(plan.sample_count * H);
        if (samples && samples_count < n_sample_values) {
            fail(Status::kInvalidArgument,
                 "samples_count: " + std::to_string(samples_count) + " floats, the sample paths need " + std::to_string(n_sample_values));
        }
        run.set_total(static_cast<uint64_t>(model_calls(plan, mode() != CN_MODE_EAGER)));
        // Graph mode: the call holds the graphs' lock and draws from their generator (every graph is registered
        // with it), seeded here as make_generator seeds a fresh one.
        std::unique_lock<std::mutex> graph_lock;
        at::Generator gen;
        if (graphs_) {
            graph_lock = graphs_->lock();
            gen = graphs_->generator();
            gen.set_current_seed(run.seed);
        } else {
            gen = make_generator(options_.device, run.seed);
        }
        // Outputs go to a buffer of our own first: a failure half-way leaves the caller's untouched.
        std::vector<float> result(n_values), paths(samples ? n_sample_values : 0);
        Exec x{cfg_, w_, rot_, options_.device, options_.dtype, gen, run, trace};
        x.fused = mode() != CN_MODE_EAGER;
        x.graphs = graphs_.get();
        for (size_t i = 0; i < plan.batches.size(); ++i) {
            Exec xi = x;
            if (i > 0) xi.trace = nullptr;  // the trace is the first batch's
            forecast_batch(xi, req, plan, plan.batches[i], result.data(), paths.empty() ? nullptr : paths.data());
        }
        std::copy(result.begin(), result.end(), out);
        if (samples) std::copy(paths.begin(), paths.end(), samples);
    }

private:
    TotoConfig cfg_;
    TotoWeights w_;
    Rotary rot_;
    std::unique_ptr<TotoGraphs> graphs_;  // graph mode; set and dropped by apply_mode (no call in flight)
};

}  // namespace

void forecast_traced(Model& model, const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples,
                     size_t samples_count, Trace* trace) {
    auto* t = dynamic_cast<TotoModel*>(&model);
    if (!t) fail(Status::kInvalidArgument, "forecast_traced: not a Toto model");
    Model::CallScope scope(model);
    t->forecast_impl(req, run, out, out_count, samples, samples_count, trace);
}

std::unique_ptr<Model> load_toto(const std::string& dir, const format::ModelConfig& config, const ModelOptions& options) {
    // fp32 is the reference's precision (the exact mode); reduced precision on the CPU would only be slower.
    if (options.dtype != c10::kFloat && !(options.device.is_cuda() && options.dtype == c10::kBFloat16)) {
        fail(Status::kUnsupported, "Toto runs in fp32 (bf16 on CUDA)");
    }
    TotoConfig c = parse_toto_config(config);
    TotoWeights w = load_weights(dir, c, options);
    return std::make_unique<TotoModel>(options, config.json(), std::move(c), std::move(w));
}

}  // namespace cn::toto
