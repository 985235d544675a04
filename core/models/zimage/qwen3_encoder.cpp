#include "core/models/zimage/qwen3_encoder.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>

#include "core/layers/attention.h"
#include "core/layers/linear.h"
#include "core/layers/mlp.h"
#include "core/layers/norm.h"
#include "core/layers/rope.h"
#include "core/runtime/weights.h"

namespace cn::zimage {

struct Qwen3Encoder::Layer {
    at::Tensor in_norm, post_norm, q_norm, k_norm;
    layers::Linear q, k, v, o, gate, up, down;
};

Qwen3Encoder::Qwen3Encoder(const TextEncoderConfig& c, Weights& w, const std::string& prefix) : c_(c) {
    const int64_t H = c.hidden, hd = c.head_dim;
    w.declare(embed_, prefix + "embed_tokens.weight", {c.vocab_size, H});
    // hidden_states[-2] is the output of layer layers-2: the last layer and the final norm never run.
    const int64_t used = c.layers - 1;
    for (const auto& [name, ref] : w.checkpoint().tensors()) {
        (void)ref;
        const std::string last = prefix + "layers." + std::to_string(used) + ".";
        if (name == prefix + "norm.weight" || name == "lm_head.weight" || name.rfind(last, 0) == 0) w.allow_unused(name);
    }
    for (int64_t i = 0; i < used; ++i) {
        auto l = std::make_shared<Layer>();
        const std::string p = prefix + "layers." + std::to_string(i) + ".";
        w.declare(l->in_norm, p + "input_layernorm.weight", {H});
        w.declare(l->post_norm, p + "post_attention_layernorm.weight", {H});
        w.declare(l->q_norm, p + "self_attn.q_norm.weight", {hd});
        w.declare(l->k_norm, p + "self_attn.k_norm.weight", {hd});
        layers::declare_linear(w, l->q, p + "self_attn.q_proj", c.heads * hd, H, c.attention_bias);
        layers::declare_linear(w, l->k, p + "self_attn.k_proj", c.kv_heads * hd, H, c.attention_bias);
        layers::declare_linear(w, l->v, p + "self_attn.v_proj", c.kv_heads * hd, H, c.attention_bias);
        layers::declare_linear(w, l->o, p + "self_attn.o_proj", H, c.heads * hd, c.attention_bias);
        layers::declare_linear(w, l->gate, p + "mlp.gate_proj", c.intermediate, H, false);
        layers::declare_linear(w, l->up, p + "mlp.up_proj", c.intermediate, H, false);
        layers::declare_linear(w, l->down, p + "mlp.down_proj", H, c.intermediate, false);
        layers_.push_back(std::move(l));
    }
}

void Qwen3Encoder::finish(c10::Device device) { inv_freq_ = layers::rope_inv_freq(c_.head_dim, c_.rope_theta, device); }

at::Tensor Qwen3Encoder::encode(const std::vector<int32_t>& ids) const {
    const int64_t L = static_cast<int64_t>(ids.size());
    const int64_t hd = c_.head_dim;
    at::Tensor idx = at::empty({L}, at::TensorOptions().dtype(at::kLong));
    int64_t* p = idx.data_ptr<int64_t>();
    for (int64_t t = 0; t < L; ++t) p[t] = ids[static_cast<size_t>(t)];
    idx = idx.to(embed_.device());
    at::Tensor x = at::index_select(embed_, 0, idx).unsqueeze(0);  // [1, L, H]
    // Qwen3RotaryEmbedding: fp32 angles, cos/sin rounded to the activations' dtype.
    const layers::RopeTables rope = layers::rope_tables(inv_freq_, 0, L, x.scalar_type());
    const int64_t group = c_.heads / c_.kv_heads;
    // Qwen3RMSNorm: fp32 variance, normalised in fp32, rounded to the input dtype, times the weight (the same
    // rounding as T5's norm for fp32/bf16 activations and weights of one dtype).
    auto norm = [&](const at::Tensor& t, const at::Tensor& w) { return layers::t5_rms_norm(t, w, c_.rms_eps); };
    for (const auto& lp : layers_) {
        const Layer& l = *lp;
        const at::Tensor h = norm(x, l.in_norm);
        // q/k norms per head, before RoPE; [1, L, heads, hd] -> [1, heads, L, hd].
        at::Tensor q = norm(layers::linear(h, l.q).view({1, L, -1, hd}), l.q_norm).transpose(1, 2);
        at::Tensor k = norm(layers::linear(h, l.k).view({1, L, -1, hd}), l.k_norm).transpose(1, 2);
        at::Tensor v = layers::linear(h, l.v).view({1, L, -1, hd}).transpose(1, 2);
        q = layers::apply_rope(q, rope);
        k = layers::apply_rope(k, rope);
        if (group > 1) {  // GQA: each KV head serves `group` query heads (repeat_kv)
            k = k.repeat_interleave(group, 1);
            v = v.repeat_interleave(group, 1);
        }
        const at::Tensor a = layers::attention(q, k, v, {}, /*causal=*/true);
        x = x + layers::linear(layers::merge_heads(a), l.o);
        x = x + layers::swiglu_mlp(norm(x, l.post_norm), l.gate, l.up, l.down);
    }
    return x.squeeze(0);
}

}  // namespace cn::zimage
