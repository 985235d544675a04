#include "core/models/zimage/zimage_dit.h"

#include <cmath>

#include <ATen/TensorOperators.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "core/common/status.h"
#include "core/layers/attention.h"
#include "core/layers/mlp.h"
#include "core/layers/norm.h"
#include "core/layers/rope.h"
#include "core/runtime/weight_index.h"
#include "core/runtime/weights.h"
#include "kernels/modulated_norm.h"
#include "kernels/qk_norm_rope.h"
#include "kernels/swiglu.h"

namespace cn::zimage {
namespace {

constexpr int64_t kFreqDim = 256;  // the sinusoidal timestep embedding's size

// Rows appended to reach a multiple of 32 repeat the last row (their values are then replaced by a pad token).
at::Tensor pad_rows(const at::Tensor& x, int64_t pad) {
    if (pad == 0) return x;
    return at::cat({x, x.slice(0, -1).expand({pad, x.size(1)})}, 0);
}

}  // namespace

struct ZImageDit::Block {
    std::string prefix;
    bool modulated = true;
    at::Tensor norm1, norm2, ffn_norm1, ffn_norm2, q_norm, k_norm;
    layers::Linear q, k, v, o, w1, w2, w3, mod;
    layers::Linear qkv, w13;  // fused path: q|k|v and w1|w3 (q, k, v, w1, w3 are their row slices)
    int64_t mod_row = 0;      // where this block's adaLN projection starts in mod_all_ (modulated blocks)
};

ZImageDit::ZImageDit(const DitConfig& c, Weights& w) : c_(c) {
    const int64_t D = c.dim, hd = c.head_dim(), F = c.ffn_dim(), A = c.adaln_dim(), C = c.in_channels;
    const int64_t patch_dim = 2 * 2 * 1 * C;
    layers::declare_linear(w, x_embed_, "all_x_embedder.2-1", D, patch_dim);
    layers::declare_linear(w, final_mod_, "all_final_layer.2-1.adaLN_modulation.1", D, A);
    layers::declare_linear(w, final_linear_, "all_final_layer.2-1.linear", patch_dim, D);
    for (size_t i = 0; i < c.patch_sizes.size(); ++i) {  // the other patch sizes' layers: present, never run
        const std::string key = std::to_string(c.patch_sizes[i]) + "-" + std::to_string(c.f_patch_sizes[i]);
        if (key == "2-1") continue;
        for (const auto& [name, ref] : w.checkpoint().tensors()) {
            (void)ref;
            if (name.rfind("all_x_embedder." + key + ".", 0) == 0 || name.rfind("all_final_layer." + key + ".", 0) == 0) {
                w.allow_unused(name);
            }
        }
    }
    layers::declare_linear(w, t_mlp0_, "t_embedder.mlp.0", 1024, kFreqDim);
    layers::declare_linear(w, t_mlp2_, "t_embedder.mlp.2", A, 1024);
    w.declare(cap_norm_, "cap_embedder.0.weight", {c.cap_feat_dim});
    layers::declare_linear(w, cap_linear_, "cap_embedder.1", D, c.cap_feat_dim);
    w.declare(x_pad_, "x_pad_token", {1, D});
    w.declare(cap_pad_, "cap_pad_token", {1, D});
    auto block = [&](const std::string& p, bool modulated) {
        auto b = std::make_shared<Block>();
        b->prefix = p;
        b->modulated = modulated;
        w.declare(b->norm1, p + "attention_norm1.weight", {D});
        w.declare(b->norm2, p + "attention_norm2.weight", {D});
        w.declare(b->ffn_norm1, p + "ffn_norm1.weight", {D});
        w.declare(b->ffn_norm2, p + "ffn_norm2.weight", {D});
        if (c.qk_norm) {
            w.declare(b->q_norm, p + "attention.norm_q.weight", {hd});
            w.declare(b->k_norm, p + "attention.norm_k.weight", {hd});
        }
        layers::declare_linear(w, b->q, p + "attention.to_q", D, D, false);
        layers::declare_linear(w, b->k, p + "attention.to_k", D, D, false);
        layers::declare_linear(w, b->v, p + "attention.to_v", D, D, false);
        layers::declare_linear(w, b->o, p + "attention.to_out.0", D, D, false);
        layers::declare_linear(w, b->w1, p + "feed_forward.w1", F, D, false);
        layers::declare_linear(w, b->w2, p + "feed_forward.w2", D, F, false);
        layers::declare_linear(w, b->w3, p + "feed_forward.w3", F, D, false);
        if (modulated) layers::declare_linear(w, b->mod, p + "adaLN_modulation.0", 4 * D, A);
        return b;
    };
    for (int64_t i = 0; i < c.n_refiner_layers; ++i) {
        noise_refiner_.push_back(block("noise_refiner." + std::to_string(i) + ".", true));
        context_refiner_.push_back(block("context_refiner." + std::to_string(i) + ".", false));
    }
    for (int64_t i = 0; i < c.n_layers; ++i) layers_.push_back(block("layers." + std::to_string(i) + ".", true));
}

void ZImageDit::finish(c10::Device device, WeightIndex& index) {
    rope_ = layers::complex_rope_tables(c_.axes_dims, c_.axes_lens, c_.rope_theta, device);
    // One block at a time (the parts are freed as their slices replace them in the index: one block's weights of
    // extra memory at most); the adaLN projections last, as one tensor.
    auto reindex = [&](const std::string& name, const at::Tensor& t) {
        const WeightIndex::Entry* e = index.find(name);
        if (!e) fail(Status::kInternal, "ZImageDit::finish: " + name + " is not in the weight index");
        index.set(name, t, false);
    };
    std::vector<layers::Linear*> mods;
    int64_t row = 0;
    for (auto* group : {&noise_refiner_, &context_refiner_, &layers_}) {
        for (auto& b : *group) {
            b->qkv = layers::fuse_rows({&b->q, &b->k, &b->v});
            b->w13 = layers::fuse_rows({&b->w1, &b->w3});
            reindex(b->prefix + "attention.to_q.weight", b->q.w);
            reindex(b->prefix + "attention.to_k.weight", b->k.w);
            reindex(b->prefix + "attention.to_v.weight", b->v.w);
            reindex(b->prefix + "feed_forward.w1.weight", b->w1.w);
            reindex(b->prefix + "feed_forward.w3.weight", b->w3.w);
        }
    }
    for (auto* group : {&noise_refiner_, &layers_}) {
        for (auto& b : *group) {
            b->mod_row = row;
            row += b->mod.w.size(0);
            mods.push_back(&b->mod);
        }
    }
    if (!mods.empty()) {
        mod_all_ = layers::fuse_rows(mods);
        for (auto* group : {&noise_refiner_, &layers_}) {
            for (auto& b : *group) {
                reindex(b->prefix + "adaLN_modulation.0.weight", b->mod.w);
                reindex(b->prefix + "adaLN_modulation.0.bias", b->mod.b);
            }
        }
    }
}

DitGeometry ZImageDit::geometry(int64_t batch, int64_t h, int64_t w, const std::vector<int64_t>& cap_lens) const {
    if (static_cast<int64_t>(cap_lens.size()) != batch) fail(Status::kInternal, "DiT geometry: captions and latents differ in batch size");
    return make_geometry(rope_, batch, h, w, cap_lens);
}

at::Tensor ZImageDit::block(const Block& b, at::Tensor x, const at::Tensor& mask, const at::Tensor& freqs, const at::Tensor& mod,
                            bool fused) const {
    if (fused) return block_fused(b, std::move(x), mask, freqs, mod);
    const double eps = c_.norm_eps;
    auto norm = [&](const at::Tensor& t, const at::Tensor& w) { return layers::t5_rms_norm(t, w, eps); };
    at::Tensor scale_msa, gate_msa, scale_mlp, gate_mlp;
    if (b.modulated) {
        const std::vector<at::Tensor> m = mod.unsqueeze(1).chunk(4, 2);
        scale_msa = 1.0 + m[0];
        gate_msa = m[1].tanh();
        scale_mlp = 1.0 + m[2];
        gate_mlp = m[3].tanh();
    }
    // Attention (ZSingleStreamAttnProcessor): q/k/v [B, S, H, hd], per-head RMSNorm (eps 1e-5), complex RoPE,
    // SDPA over [B, H, S, hd] with the key mask, heads merged, to_out.
    at::Tensor h = norm(x, b.norm1);
    if (b.modulated) h = h * scale_msa;
    const int64_t B = x.size(0), S = x.size(1), H = c_.n_heads, hd = c_.head_dim();
    at::Tensor q = layers::linear(h, b.q).view({B, S, H, hd});
    at::Tensor k = layers::linear(h, b.k).view({B, S, H, hd});
    const at::Tensor v = layers::linear(h, b.v).view({B, S, H, hd});
    if (c_.qk_norm) {
        q = layers::t5_rms_norm(q, b.q_norm, 1e-5);
        k = layers::t5_rms_norm(k, b.k_norm, 1e-5);
    }
    q = layers::apply_complex_rope(q, freqs);
    k = layers::apply_complex_rope(k, freqs);
    const at::Tensor a = layers::attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask);
    const at::Tensor attn = layers::linear(a.transpose(1, 2).flatten(2, 3), b.o);
    if (b.modulated) {
        x = x + gate_msa * norm(attn, b.norm2);
        h = norm(x, b.ffn_norm1) * scale_mlp;
        x = x + gate_mlp * norm(layers::swiglu_mlp(h, b.w1, b.w3, b.w2), b.ffn_norm2);
    } else {
        x = x + norm(attn, b.norm2);
        x = x + norm(layers::swiglu_mlp(norm(x, b.ffn_norm1), b.w1, b.w3, b.w2), b.ffn_norm2);
    }
    return x;
}

at::Tensor ZImageDit::block_fused(const Block& b, at::Tensor x, const at::Tensor& mask, const at::Tensor& freqs,
                                  const at::Tensor& mod) const {
    const double eps = c_.norm_eps;
    const int64_t B = x.size(0), S = x.size(1), D = c_.dim, H = c_.n_heads, F = c_.ffn_dim();
    at::Tensor scale_msa, gate_msa, scale_mlp, gate_mlp;
    if (b.modulated) {  // [B, D] each, rounded as eager's 1 + m and tanh(m)
        scale_msa = 1.0 + mod.narrow(1, 0, D);
        gate_msa = mod.narrow(1, D, D).tanh();
        scale_mlp = 1.0 + mod.narrow(1, 2 * D, D);
        gate_mlp = mod.narrow(1, 3 * D, D).tanh();
    }
    x = x.contiguous();
    const at::Tensor h = kernels::rms_norm_scale(x, b.norm1, eps, scale_msa);
    const at::Tensor qkv = layers::linear(h, b.qkv);                                  // [B, S, 3D]
    auto [q, k, v] = kernels::qk_norm_rope(qkv, H, b.q_norm, b.k_norm, 1e-5, freqs);  // [B, H, S, hd] each
    at::Tensor a;
    if (cudnn_attention_ && q.is_cuda() && !mask.defined() && q.scalar_type() != at::kFloat) {
        a = std::get<0>(at::_scaled_dot_product_cudnn_attention(q, k, v, std::nullopt, /*compute_log_sumexp=*/false));
    } else {
        a = layers::attention(q, k, v, mask);
    }
    const at::Tensor attn = layers::linear(a.transpose(1, 2).reshape({B, S, D}), b.o);
    kernels::add_gated_rms_norm(x, attn, b.norm2, eps, gate_msa);
    const at::Tensor h2 = kernels::rms_norm_scale(x, b.ffn_norm1, eps, scale_mlp);
    const at::Tensor gu = layers::linear(h2, b.w13).view({B * S, 2 * F});
    const at::Tensor y = layers::linear(kernels::swiglu(gu), b.w2).view({B, S, D});
    kernels::add_gated_rms_norm(x, y, b.ffn_norm2, eps, gate_mlp);
    return x;
}

ZImageDit::Captions ZImageDit::embed_captions(const std::vector<at::Tensor>& caps, bool fused) const {
    Captions out;
    std::vector<at::Tensor> padded, pad_masks, ids;
    for (const auto& cap : caps) {
        const int64_t L = cap.size(0), pad = pad_len(L), Lc = L + pad;
        padded.push_back(pad_rows(cap, pad));
        at::Tensor m = at::zeros({Lc, 1}, at::TensorOptions().dtype(at::kBool));
        if (pad > 0) m.slice(0, L).fill_(true);
        pad_masks.push_back(m.to(cap.device()));
        ids.push_back(grid_ids(Lc, 1, 1, 1));  // (1 + i, 0, 0), pad rows included
        out.lens.push_back(Lc);
    }
    at::Tensor feats = layers::linear(layers::t5_rms_norm(at::cat(padded, 0), cap_norm_, c_.norm_eps), cap_linear_);
    feats = at::where(at::cat(pad_masks, 0), cap_pad_, feats);
    const at::Tensor mask = key_mask(out.lens, feats.device());
    const at::Tensor freqs = rope_factors(rope_, ids);
    at::Tensor x = pad_batch(feats.split_with_sizes(out.lens, 0));
    for (const auto& b : context_refiner_) x = block(*b, x, mask, freqs, at::Tensor(), fused);
    out.feats = x;
    return out;
}

at::Tensor ZImageDit::forward(const at::Tensor& latents, const at::Tensor& t, const at::Tensor& cap_feats, const DitGeometry& g,
                              bool fused) const {
    const int64_t B = latents.size(0), C = c_.in_channels, h = latents.size(2), w = latents.size(3);
    if (B != g.batch || h != g.h || w != g.w || cap_feats.size(0) != B)
        fail(Status::kInternal, "DiT forward: inputs and geometry disagree");
    const int64_t Ht = h / 2, Wt = w / 2, N = g.tokens, Np = N + g.pad;

    // Timestep embedding [fp32 until the MLP]: cos first, then sin.
    const auto f32 = t.options().dtype(at::kFloat);
    const at::Tensor freqs_t = at::exp(-std::log(10000.0) * at::arange(0, kFreqDim / 2, f32) / (kFreqDim / 2));
    const at::Tensor args = (t * c_.t_scale).unsqueeze(1).to(at::kFloat) * freqs_t.unsqueeze(0);
    const at::Tensor temb_in = at::cat({at::cos(args), at::sin(args)}, -1).to(t_mlp0_.w.scalar_type());
    const at::Tensor adaln = layers::linear(at::silu(layers::linear(temb_in, t_mlp0_)), t_mlp2_).to(latents.scalar_type());
    // Fused: every modulated block's projection in one GEMM, [B, 4D] slices of it per block.
    const at::Tensor mods = fused && mod_all_.w.defined() ? layers::linear(adaln, mod_all_) : at::Tensor();
    auto mod_of = [&](const Block& b) {
        if (!b.modulated) return at::Tensor();
        return fused ? mods.narrow(1, b.mod_row, b.mod.w.size(0)) : layers::linear(adaln, b.mod);
    };

    // Patchify each image [C, 1, h, w] -> [N, 4C] (feature order ph, pw, c), pad rows, embed, pad token.
    std::vector<at::Tensor> patches;
    for (int64_t i = 0; i < B; ++i) {
        const at::Tensor p = latents[i].view({C, 1, 1, Ht, 2, Wt, 2}).permute({1, 3, 5, 2, 4, 6, 0}).reshape({N, 4 * C});
        patches.push_back(pad_rows(p, g.pad));
    }
    at::Tensor x = layers::linear(at::cat(patches, 0), x_embed_);
    if (g.img_pad_rows.defined()) x = at::where(g.img_pad_rows, x_pad_, x);
    x = x.view({B, Np, -1});
    for (const auto& b : noise_refiner_) x = block(*b, x, at::Tensor(), g.img_freqs, mod_of(*b), fused);

    // Unified sequence per item: [image rows (Np), caption rows (Lc_i)], zero-padded across the batch.
    std::vector<at::Tensor> unified;
    for (int64_t i = 0; i < B; ++i) unified.push_back(at::cat({x[i], cap_feats[i].slice(0, 0, g.cap_lens[static_cast<size_t>(i)])}, 0));
    at::Tensor u = pad_batch(unified);
    for (const auto& b : layers_) u = block(*b, u, g.uni_mask, g.uni_freqs, mod_of(*b), fused);

    // Final layer: LayerNorm (no affine, eps 1e-6) * (1 + Linear(silu(adaln))), Linear to the patch features.
    const at::Tensor scale = (1.0 + layers::linear(at::silu(adaln), final_mod_)).unsqueeze(1);
    u = layers::linear(at::layer_norm(u, {c_.dim}, {}, {}, 1e-6) * scale, final_linear_);
    // Unpatchify the first N rows of each item: [N, 4C] -> [C, h, w].
    return u.slice(1, 0, N).reshape({B, Ht, Wt, 1, 2, 2, C}).permute({0, 6, 3, 1, 4, 2, 5}).reshape({B, C, h, w});
}

}  // namespace cn::zimage
