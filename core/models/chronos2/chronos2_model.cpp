#include "core/models/chronos2/chronos2_model.h"

#include <tuple>

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>

#include "core/common/status.h"
#include "core/models/chronos2/chronos2_config.h"
#include "core/models/chronos2/chronos2_forward.h"
#include "core/models/chronos2/chronos2_pipeline.h"
#include "core/runtime/weights.h"
#ifdef CN_WITH_CUDA
#include "core/models/chronos2/chronos2_graphs.h"
#endif

namespace cn::chronos2 {
namespace {

void expect_residual_block(Weights& w, const std::string& p, int64_t in, int64_t hidden, int64_t out) {
    w.expect(p + ".hidden_layer.weight", {hidden, in});
    w.expect(p + ".hidden_layer.bias", {hidden});
    w.expect(p + ".output_layer.weight", {out, hidden});
    w.expect(p + ".output_layer.bias", {out});
    w.expect(p + ".residual_layer.weight", {out, in});
    w.expect(p + ".residual_layer.bias", {out});
}

ResidualBlockWeights load_residual_block(const Weights& w, const std::string& p) {
    return {w.load(p + ".hidden_layer.weight"), w.load(p + ".hidden_layer.bias"),
            w.load(p + ".output_layer.weight"), w.load(p + ".output_layer.bias"),
            w.load(p + ".residual_layer.weight"), w.load(p + ".residual_layer.bias")};
}

// q, k, v weights in one [3 I, D] tensor, and the three as row slices of it (contiguous views).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> load_qkv(const Weights& w, const std::string& p) {
    const at::Tensor qkv = at::cat({w.load(p + "q.weight"), w.load(p + "k.weight"), w.load(p + "v.weight")}, 0);
    const int64_t I = qkv.size(0) / 3;
    return {qkv, qkv.slice(0, 0, I), qkv.slice(0, I, 2 * I), qkv.slice(0, 2 * I)};
}

}  // namespace

Chronos2Weights load_weights(const Chronos2Config& cfg, const Weights& w) {
    Chronos2Weights out;
    out.inv_freq = rope_inv_freq(cfg, w.options().device);
    out.shared = w.load("shared.weight");
    out.input_embed = load_residual_block(w, "input_patch_embedding");
    out.output_embed = load_residual_block(w, "output_patch_embedding");
    out.final_norm = w.load("encoder.final_layer_norm.weight");
    for (int64_t i = 0; i < cfg.num_layers; ++i) {
        const std::string b = "encoder.block." + std::to_string(i) + ".layer.";
        LayerWeights l;
        l.time_norm = w.load(b + "0.layer_norm.weight");
        std::tie(l.time_qkv, l.time_q, l.time_k, l.time_v) = load_qkv(w, b + "0.self_attention.");
        l.time_o = w.load(b + "0.self_attention.o.weight");
        l.group_norm = w.load(b + "1.layer_norm.weight");
        std::tie(l.group_qkv, l.group_q, l.group_k, l.group_v) = load_qkv(w, b + "1.self_attention.");
        l.group_o = w.load(b + "1.self_attention.o.weight");
        l.ff_norm = w.load(b + "2.layer_norm.weight");
        l.ff_wi = w.load(b + "2.mlp.wi.weight");
        l.ff_wo = w.load(b + "2.mlp.wo.weight");
        out.layers.push_back(std::move(l));
    }
    return out;
}

namespace {

class Chronos2Model final : public Model {
public:
    Chronos2Model(ModelOptions options, nlohmann::json config, Chronos2Config cfg, const Weights& w)
        : Model(options, std::move(config)), cfg_(std::move(cfg)) {
        w_ = load_weights(cfg_, w);
        pipe_.device = options.device;
        pipe_.dtype = options.dtype;
        pipe_.max_horizon = kMaxHorizon;
        n_parameters_ = w.expected_elements();
        weight_bytes_ = n_parameters_ * c10::elementSize(options.dtype);
    }

    cn_model_kind kind() const override { return CN_MODEL_KIND_CHRONOS2; }

    void fill_info(cn_model_info& info) const override {
        Model::fill_info(info);
        info.context_length = cfg_.context_length;
        info.native_horizon = cfg_.native_horizon();
        info.max_horizon = kMaxHorizon;
        info.n_default_quantiles = static_cast<int64_t>(cfg_.quantiles.size());
    }

    std::vector<float> quantiles() const override {
        return std::vector<float>(cfg_.quantiles.begin(), cfg_.quantiles.end());
    }

    ForecastShape forecast_shape(const ForecastRequest& req) const override {
        return chronos2::forecast_shape(cfg_, pipe_, req);
    }

    void forecast(const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples,
                  size_t samples_count) override {
        if (samples || samples_count) {
            fail(Status::kInvalidArgument, "samples: Chronos-2 forecasts quantiles and draws no samples; pass NULL and 0");
        }
        chronos2::forecast(cfg_, w_, pipe_, req, run, out, out_count);
    }

    // The reference rolls out autoregressively past the native horizon without a hard limit; we bound it
    // so a request cannot ask for unbounded work.
    static constexpr int64_t kMaxHorizon = 1 << 16;

protected:
    // eager: ATen ops; graph: CUDA graphs per shape bucket (CUDA builds, CUDA devices); fused: the pass on
    // cutenative's kernels (forward_fused), captured in CUDA graphs like graph mode on CUDA devices.
    void apply_mode(cn_mode mode) override {
#ifndef CN_WITH_CUDA
        if (mode == CN_MODE_GRAPH) Model::apply_mode(mode);  // UNSUPPORTED with the standard message
#else
        if (mode == CN_MODE_GRAPH && !options_.device.is_cuda()) Model::apply_mode(mode);
        std::unique_ptr<GraphCache> graphs;
        if (options_.device.is_cuda() && mode != CN_MODE_EAGER) {
            graphs = std::make_unique<GraphCache>(cfg_, w_, options_.dtype, options_.device,
                                                  mode == CN_MODE_FUSED ? forward_fused : forward);
        }
        graphs_ = std::move(graphs);
        pipe_.graphs = graphs_.get();
#endif
        pipe_.fused = mode == CN_MODE_FUSED;
    }

    MemoryUse memory_use() const override {
        MemoryUse m{weight_bytes_, 0, 0};
#ifdef CN_WITH_CUDA
        if (graphs_) m.graph_pool_bytes = graphs_->pool_bytes();
#endif
        return m;
    }

private:
    Chronos2Config cfg_;
    Chronos2Weights w_;
    PipelineOptions pipe_;
#ifdef CN_WITH_CUDA
    std::unique_ptr<GraphCache> graphs_;  // declared after w_: destroyed before the weights it replays
#endif
};

}  // namespace

std::unique_ptr<Model> load_chronos2(const std::string& dir, const format::ModelConfig& config,
                                     const ModelOptions& options) {
    Chronos2Config cfg = parse_chronos2_config(config);
    auto checkpoint = format::Checkpoint::open(dir);
    Weights w(checkpoint, WeightLoadOptions{options.device, options.dtype, options.mmap_weights, options.check_tensors});
    const int64_t D = cfg.d_model, I = cfg.inner_dim(), F = cfg.d_ff, p = cfg.patch_size;
    const int64_t Q = static_cast<int64_t>(cfg.quantiles.size());
    w.expect("shared.weight", {2, D});
    expect_residual_block(w, "input_patch_embedding", 3 * p, F, D);
    expect_residual_block(w, "output_patch_embedding", D, F, Q * p);
    w.expect("encoder.final_layer_norm.weight", {D});
    for (int64_t i = 0; i < cfg.num_layers; ++i) {
        const std::string b = "encoder.block." + std::to_string(i) + ".layer.";
        for (int sub : {0, 1}) {
            const std::string a = b + std::to_string(sub);
            w.expect(a + ".layer_norm.weight", {D});
            w.expect(a + ".self_attention.q.weight", {I, D});
            w.expect(a + ".self_attention.k.weight", {I, D});
            w.expect(a + ".self_attention.v.weight", {I, D});
            w.expect(a + ".self_attention.o.weight", {D, I});
        }
        w.expect(b + "2.layer_norm.weight", {D});
        w.expect(b + "2.mlp.wi.weight", {F, D});
        w.expect(b + "2.mlp.wo.weight", {D, F});
    }
    w.validate();
    return std::make_unique<Chronos2Model>(options, config.json(), std::move(cfg), w);
}

}  // namespace cn::chronos2
