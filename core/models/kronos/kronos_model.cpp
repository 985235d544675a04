// The Kronos Model subclass (kronos_model.h): the mode turned into decode options, the info it reports, and a
// forecast call as tasks -> batches -> decoding -> outputs (kronos_pipeline.h, kronos_decode.h).
#include "core/models/kronos/kronos_model.h"

#include <algorithm>
#include <memory>

#include "core/common/status.h"
#include "core/models/kronos/kronos_config.h"
#include "core/models/kronos/kronos_decode.h"
#include "core/models/kronos/kronos_graphs.h"
#include "core/models/kronos/kronos_pipeline.h"
#include "core/models/kronos/kronos_weights.h"

namespace cn::kronos {
namespace {

class KronosModel final : public Model {
public:
    KronosModel(ModelOptions options, nlohmann::json config, KronosConfig cfg, KronosWeights w)
        : Model(options, std::move(config)), cfg_(cfg), tw_(std::move(w.tok)), pw_(std::move(w.pred)) {
        n_parameters_ = w.n_parameters;
        weight_bytes_ = w.n_parameters * c10::elementSize(options.dtype);
        decode_ = decode_options(CN_MODE_EAGER, pw_, nullptr);
    }

    cn_model_kind kind() const override { return CN_MODEL_KIND_KRONOS; }

protected:
    // The mode's decode options (kronos_decode.h), computed here once: calls only read them (set_mode runs with no
    // call in flight). Graph mode needs a CUDA device; its graphs are dropped when another mode is set.
    void apply_mode(cn_mode mode) override {
        if (mode == CN_MODE_GRAPH && !options_.device.is_cuda()) Model::apply_mode(mode);  // UNSUPPORTED
        std::unique_ptr<KronosGraphs> graphs;
        if (mode == CN_MODE_GRAPH) graphs = KronosGraphs::create(cfg_.pred, pw_, cfg_.tok, tw_, options_.device);
        decode_ = decode_options(mode, pw_, graphs.get());
        graphs_ = std::move(graphs);
    }

    MemoryUse memory_use() const override {
        MemoryUse m{weight_bytes_, 0, 0};
        if (graphs_) m.graph_pool_bytes = graphs_->pool_bytes();
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
        make_tasks(req, cfg_.pred);  // structural checks
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

    void forecast_impl(const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples, size_t samples_count,
                       KronosTrace* trace) const {
        const ForecastShape shape = forecast_shape(req);
        if (out_count < shape.n_values()) {
            fail(Status::kInvalidArgument,
                 "out_count: " + std::to_string(out_count) + " floats, the forecast needs " + std::to_string(shape.n_values()));
        }
        if (samples && samples_count < shape.n_sample_values()) {
            fail(Status::kInvalidArgument, "samples_count: " + std::to_string(samples_count) + " floats, the sample paths need " +
                                               std::to_string(shape.n_sample_values()));
        }
        const std::vector<Task> ts = make_tasks(req, cfg_.pred);
        validate_values(req, ts);
        const int64_t P = req.horizon, S = req.sample_count;
        const std::vector<Batch> batches = make_batches(req, ts);
        run.set_total(static_cast<uint64_t>(batches.size()) * static_cast<uint64_t>(P));
        std::vector<float> result(shape.n_values()), paths(samples ? shape.n_sample_values() : 0);
        std::vector<std::vector<int64_t>> s1_rows(trace ? ts.size() * S : 0), s2_rows(s1_rows.size());

        std::vector<DecodeCall::BatchShape> shapes;
        for (const Batch& b : batches) shapes.push_back({b.history, static_cast<int64_t>(b.members.size()) * S});
        const Sampling sampling{req.temperature, req.top_k, req.top_p};
        const float clip = static_cast<float>(cfg_.pred.clip);
        {
            // The call's decoding: its generator, and in graph mode the graphs' lock until the last batch is done.
            DecodeCall call(KronosNets{cfg_, tw_, pw_}, decode_, sampling, shapes, P, run.seed, options_.device);
            for (const Batch& b : batches) {  // one predict_batch call each
                const HostBatch h = prepare_batch(req, ts, b, clip);
                const DeviceBatch d = to_device(h, S, clip, options_.device, options_.dtype);
                const DecodedBatch t = call.run(d.x, d.stamp, run);
                if (!s1_rows.empty()) record_tokens(t.all1, t.all2, h, b, S, s1_rows, s2_rows);  // for KronosTrace
                write_outputs(t.z, h, ts, b, S, result.data(), paths.empty() ? nullptr : paths.data());
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
    KronosConfig cfg_;
    TokenizerWeights tw_;
    PredictorWeights pw_;
    std::unique_ptr<KronosGraphs> graphs_;  // graph mode; declared after the weights it replays: destroyed first
    DecodeOptions decode_;                  // the mode's options (apply_mode)
};

}  // namespace

void forecast_traced(Model& model, const ForecastRequest& req, RunContext& run, float* out, size_t out_count, KronosTrace* trace) {
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
    return std::make_unique<KronosModel>(options, config.json(), c, load_weights(dir, c, options));
}

}  // namespace cn::kronos
