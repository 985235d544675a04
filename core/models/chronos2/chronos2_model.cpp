#include "core/models/chronos2/chronos2_model.h"

#include <cstdlib>
#include <string>

#include <ATen/core/Tensor.h>
#include <ATen/ops/matmul.h>

#include "core/common/status.h"
#include "core/layers/linear.h"
#include "core/layers/rope.h"
#include "core/models/chronos2/chronos2_config.h"
#include "core/models/chronos2/chronos2_forward.h"
#include "core/models/chronos2/chronos2_graphs.h"
#include "core/models/chronos2/chronos2_pipeline.h"
#include "core/runtime/stream_lanes.h"
#include "core/runtime/weights.h"

namespace cn::chronos2 {
namespace {

// Streams the graph and fused modes run batches on side by side (PipelineOptions::lanes): CN_CHRONOS2_LANES, 1 to 4,
// default 2 (on the H100 three lost to two at every batch size); 1 keeps every pass on the caller's stream.
int lanes_from_env() {
    constexpr int kDefault = 2;
    const char* v = std::getenv("CN_CHRONOS2_LANES");
    if (!v || !*v) return kDefault;
    const int n = std::atoi(v);
    return n >= 1 && n <= 4 ? n : kDefault;
}

void declare_residual_block(Weights& w, ResidualBlockWeights& r, const std::string& p, int64_t in, int64_t hidden, int64_t out) {
    w.declare(r.hidden_w, p + ".hidden_layer.weight", {hidden, in});
    w.declare(r.hidden_b, p + ".hidden_layer.bias", {hidden});
    w.declare(r.output_w, p + ".output_layer.weight", {out, hidden});
    w.declare(r.output_b, p + ".output_layer.bias", {out});
    w.declare(r.residual_w, p + ".residual_layer.weight", {out, in});
    w.declare(r.residual_b, p + ".residual_layer.bias", {out});
}

void declare_attention(Weights& w, at::Tensor& q, at::Tensor& k, at::Tensor& v, at::Tensor& o, const std::string& p, int64_t inner,
                       int64_t d) {
    w.declare(q, p + ".q.weight", {inner, d});
    w.declare(k, p + ".k.weight", {inner, d});
    w.declare(v, p + ".v.weight", {inner, d});
    w.declare(o, p + ".o.weight", {d, inner});
}

// q, k, v weights in one [3 I, D] tensor; the three become row slices of it (contiguous views, the same values).
at::Tensor fuse_qkv(at::Tensor& q, at::Tensor& k, at::Tensor& v) {
    layers::Linear lq{q, {}}, lk{k, {}}, lv{v, {}};
    const at::Tensor qkv = layers::fuse_rows({&lq, &lk, &lv}).w;
    q = lq.w;
    k = lk.w;
    v = lv.w;
    return qkv;
}

}  // namespace

void declare_weights(const Chronos2Config& cfg, Weights& w, Chronos2Weights& out) {
    const int64_t D = cfg.d_model, I = cfg.inner_dim(), F = cfg.d_ff, p = cfg.patch_size;
    const int64_t Q = static_cast<int64_t>(cfg.quantiles.size());
    w.declare(out.shared, "shared.weight", {2, D});
    declare_residual_block(w, out.input_embed, "input_patch_embedding", 3 * p, F, D);
    declare_residual_block(w, out.output_embed, "output_patch_embedding", D, F, Q * p);
    w.declare(out.final_norm, "encoder.final_layer_norm.weight", {D});
    out.layers.resize(static_cast<size_t>(cfg.num_layers));
    for (int64_t i = 0; i < cfg.num_layers; ++i) {
        LayerWeights& l = out.layers[static_cast<size_t>(i)];
        const std::string b = "encoder.block." + std::to_string(i) + ".layer.";
        w.declare(l.time_norm, b + "0.layer_norm.weight", {D});
        declare_attention(w, l.time_q, l.time_k, l.time_v, l.time_o, b + "0.self_attention", I, D);
        w.declare(l.group_norm, b + "1.layer_norm.weight", {D});
        declare_attention(w, l.group_q, l.group_k, l.group_v, l.group_o, b + "1.self_attention", I, D);
        w.declare(l.ff_norm, b + "2.layer_norm.weight", {D});
        w.declare(l.ff_wi, b + "2.mlp.wi.weight", {F, D});
        w.declare(l.ff_wo, b + "2.mlp.wo.weight", {D, F});
    }
}

void finish_weights(const Chronos2Config& cfg, c10::Device device, Chronos2Weights& out) {
    for (LayerWeights& l : out.layers) {
        l.time_qkv = fuse_qkv(l.time_q, l.time_k, l.time_v);
        l.group_qkv = fuse_qkv(l.group_q, l.group_k, l.group_v);
        l.group_vo = at::matmul(l.group_o.to(at::kDouble), l.group_v.to(at::kDouble)).to(l.group_o.scalar_type()).contiguous();
    }
    out.inv_freq = layers::rope_inv_freq(cfg.d_kv, cfg.rope_theta, device);
}

namespace {

class Chronos2Model final : public Model {
public:
    Chronos2Model(ModelOptions options, nlohmann::json config, Chronos2Config cfg, Chronos2Weights w, uint64_t n_parameters)
        : Model(options, std::move(config)), cfg_(std::move(cfg)), w_(std::move(w)) {
        pipe_.device = options.device;
        pipe_.dtype = options.dtype;
        pipe_.max_horizon = kMaxRolloutHorizon;
        n_parameters_ = n_parameters;
        weight_bytes_ = n_parameters_ * c10::elementSize(options.dtype);
    }

    cn_model_kind kind() const override { return CN_MODEL_KIND_CHRONOS2; }

    void fill_info(cn_model_info& info) const override {
        Model::fill_info(info);
        info.context_length = cfg_.context_length;
        info.native_horizon = cfg_.native_horizon();
        info.max_horizon = kMaxRolloutHorizon;
        info.n_default_quantiles = static_cast<int64_t>(cfg_.quantiles.size());
    }

    std::vector<float> quantiles() const override { return std::vector<float>(cfg_.quantiles.begin(), cfg_.quantiles.end()); }

    ForecastShape forecast_shape(const ForecastRequest& req) const override { return chronos2::forecast_shape(cfg_, pipe_, req); }

    void forecast(const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples,
                  size_t samples_count) override {
        if (samples || samples_count) {
            fail(Status::kInvalidArgument, "samples: Chronos-2 forecasts quantiles and draws no samples; pass NULL and 0");
        }
        chronos2::forecast(cfg_, w_, pipe_, req, run, out, out_count);
    }

    // The reference rolls out autoregressively past the native horizon without a hard limit; we bound it
    // so a request cannot ask for unbounded work.
    static constexpr int64_t kMaxRolloutHorizon = 1 << 16;

protected:
    // eager: ATen ops; graph: CUDA graphs per shape bucket (CUDA builds, CUDA devices); fused: the pass on
    // cutenative's kernels (forward_fused), captured in CUDA graphs like graph mode on CUDA devices.
    // Only CUDA models capture graphs (a CUDA-less build has none; its GraphCache is chronos2_graphs_stub.cpp).
    void apply_mode(cn_mode mode) override {
        if (mode == CN_MODE_GRAPH && !options_.device.is_cuda()) Model::apply_mode(mode);  // UNSUPPORTED, the standard message
        std::unique_ptr<GraphCache> graphs;
        if (options_.device.is_cuda() && mode != CN_MODE_EAGER) {
            graphs =
                std::make_unique<GraphCache>(cfg_, w_, options_.dtype, options_.device, mode == CN_MODE_FUSED ? forward_fused : forward);
        }
        const int n_lanes = graphs ? lanes_from_env() : 1;
        std::unique_ptr<StreamLanes> lanes = n_lanes > 1 ? std::make_unique<StreamLanes>(options_.device, n_lanes) : nullptr;
        // Nothing below throws: the old lanes (idle: every call waits for its pieces) go before the old graphs.
        lanes_ = std::move(lanes);
        graphs_ = std::move(graphs);
        pipe_.graphs = graphs_.get();
        pipe_.lanes = lanes_.get();
        pipe_.fused = mode == CN_MODE_FUSED;
    }

    MemoryUse memory_use() const override {
        MemoryUse m{weight_bytes_, 0, 0};
        if (graphs_) m.graph_pool_bytes = graphs_->pool_bytes();
        return m;
    }

private:
    Chronos2Config cfg_;
    Chronos2Weights w_;
    PipelineOptions pipe_;
    std::unique_ptr<GraphCache> graphs_;  // declared after w_: destroyed before the weights it replays
    std::unique_ptr<StreamLanes> lanes_;  // declared after graphs_: its streams are waited for before the graphs go
};

}  // namespace

std::unique_ptr<Model> load_chronos2(const std::string& dir, const format::ModelConfig& config, const ModelOptions& options) {
    Chronos2Config cfg = parse_chronos2_config(config);
    auto checkpoint = format::Checkpoint::open(dir);
    Weights w(checkpoint, WeightLoadOptions{options.device, options.dtype, options.mmap_weights, options.check_tensors});
    Chronos2Weights cw;
    declare_weights(cfg, w, cw);
    w.validate();
    w.load_all();
    finish_weights(cfg, options.device, cw);
    const uint64_t n_parameters = w.expected_elements();
    return std::make_unique<Chronos2Model>(options, config.json(), std::move(cfg), std::move(cw), n_parameters);
}

}  // namespace cn::chronos2
