#include "core/models/zimage/zimage_dit.h"

#include <cmath>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "core/common/status.h"
#include "core/layers/attention.h"
#include "core/layers/mlp.h"
#include "core/layers/norm.h"
#include "core/layers/rope.h"
#include "core/runtime/weights.h"

namespace cn::zimage {
namespace {

constexpr int64_t kSeqMultiple = 32;  // SEQ_MULTI_OF: image and caption sequences are padded to multiples of it
constexpr int64_t kFreqDim = 256;     // the sinusoidal timestep embedding's size

int64_t pad_len(int64_t n) { return (kSeqMultiple - n % kSeqMultiple) % kSeqMultiple; }

// Position ids [n, 3] (int32) of a row-major (f, h, w) grid starting at `start`, as create_coordinate_grid.
at::Tensor grid_ids(int64_t f, int64_t h, int64_t w, int64_t f0) {
    at::Tensor ids = at::empty({f * h * w, 3}, at::TensorOptions().dtype(at::kInt));
    int32_t* p = ids.data_ptr<int32_t>();
    for (int64_t a = 0; a < f; ++a) {
        for (int64_t b = 0; b < h; ++b) {
            for (int64_t c = 0; c < w; ++c) {
                *p++ = static_cast<int32_t>(f0 + a);
                *p++ = static_cast<int32_t>(b);
                *p++ = static_cast<int32_t>(c);
            }
        }
    }
    return ids;
}

// Rows appended to reach a multiple of 32 repeat the last row (their values are then replaced by a pad token).
at::Tensor pad_rows(const at::Tensor& x, int64_t pad) {
    if (pad == 0) return x;
    return at::cat({x, x.slice(0, -1).expand({pad, x.size(1)})}, 0);
}

// [n_i, D] items -> [B, max n, D], zero rows after each item (pad_sequence); and the [B, max] key mask when the
// lengths differ (undefined when they are all equal: diffusers passes no mask then).
at::Tensor pad_batch(const std::vector<at::Tensor>& items, at::Tensor* mask) {
    int64_t max_len = 0;
    bool equal = true;
    for (const auto& t : items) {
        equal = equal && (max_len == 0 || t.size(0) == max_len);
        max_len = std::max(max_len, t.size(0));
    }
    std::vector<at::Tensor> padded;
    for (const auto& t : items) {
        if (t.size(0) == max_len) {
            padded.push_back(t);
        } else {
            std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
            shape[0] = max_len - t.size(0);
            padded.push_back(at::cat({t, at::zeros(shape, t.options())}, 0));
        }
    }
    if (mask) {
        *mask = at::Tensor();
        if (!equal) {
            at::Tensor m = at::zeros({static_cast<int64_t>(items.size()), max_len}, at::TensorOptions().dtype(at::kBool));
            for (size_t i = 0; i < items.size(); ++i) m[static_cast<int64_t>(i)].slice(0, 0, items[i].size(0)).fill_(true);
            *mask = m.to(items[0].device());
        }
    }
    return at::stack(padded, 0);
}

}  // namespace

struct ZImageDit::Block {
    bool modulated = true;
    at::Tensor norm1, norm2, ffn_norm1, ffn_norm2, q_norm, k_norm;
    layers::Linear q, k, v, o, w1, w2, w3, mod;
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

void ZImageDit::finish(c10::Device device) { rope_ = layers::complex_rope_tables(c_.axes_dims, c_.axes_lens, c_.rope_theta, device); }

at::Tensor ZImageDit::freqs_of(const std::vector<at::Tensor>& ids) const {
    std::vector<at::Tensor> f;
    for (const auto& i : ids) f.push_back(layers::complex_rope_gather(rope_, i.to(rope_[0].device())));
    return pad_batch(f, nullptr);
}

at::Tensor ZImageDit::block(const Block& b, const at::Tensor& x_in, const at::Tensor& mask, const at::Tensor& freqs,
                            const at::Tensor& adaln) const {
    const double eps = c_.norm_eps;
    auto norm = [&](const at::Tensor& t, const at::Tensor& w) { return layers::t5_rms_norm(t, w, eps); };
    at::Tensor x = x_in;
    at::Tensor scale_msa, gate_msa, scale_mlp, gate_mlp;
    if (b.modulated) {
        const std::vector<at::Tensor> m = layers::linear(adaln, b.mod).unsqueeze(1).chunk(4, 2);
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
    const at::Tensor m4 = mask.defined() ? mask.view({B, 1, 1, S}) : at::Tensor();
    const at::Tensor a = layers::attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), m4);
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

ZImageDit::Captions ZImageDit::embed_captions(const std::vector<at::Tensor>& caps) const {
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
    std::vector<int64_t> lens = out.lens;
    at::Tensor feats = layers::linear(layers::t5_rms_norm(at::cat(padded, 0), cap_norm_, c_.norm_eps), cap_linear_);
    feats = at::where(at::cat(pad_masks, 0), cap_pad_, feats);
    at::Tensor mask;
    const at::Tensor batch = pad_batch(feats.split_with_sizes(lens, 0), &mask);
    const at::Tensor freqs = freqs_of(ids);
    at::Tensor x = batch;
    for (const auto& b : context_refiner_) x = block(*b, x, mask, freqs, at::Tensor());
    out.feats = x;
    return out;
}

at::Tensor ZImageDit::forward(const at::Tensor& latents, const at::Tensor& t, const Captions& caps) const {
    const int64_t B = latents.size(0), C = c_.in_channels, h = latents.size(2), w = latents.size(3);
    if (static_cast<int64_t>(caps.lens.size()) != B) fail(Status::kInternal, "DiT forward: captions and latents differ in batch size");
    const int64_t Ht = h / 2, Wt = w / 2, N = Ht * Wt, pad = pad_len(N), Np = N + pad;

    // Timestep embedding [fp32 until the MLP]: cos first, then sin.
    const auto f32 = t.options().dtype(at::kFloat);
    const at::Tensor freqs_t = at::exp(-std::log(10000.0) * at::arange(0, kFreqDim / 2, f32) / (kFreqDim / 2));
    const at::Tensor args = (t * c_.t_scale).unsqueeze(1).to(at::kFloat) * freqs_t.unsqueeze(0);
    const at::Tensor temb_in = at::cat({at::cos(args), at::sin(args)}, -1).to(t_mlp0_.w.scalar_type());
    const at::Tensor adaln = layers::linear(at::silu(layers::linear(temb_in, t_mlp0_)), t_mlp2_).to(latents.scalar_type());

    // Patchify each image [C, 1, h, w] -> [N, 4C] (feature order ph, pw, c), pad rows, embed, pad token.
    std::vector<at::Tensor> patches, img_ids;
    for (int64_t i = 0; i < B; ++i) {
        const at::Tensor p = latents[i].view({C, 1, 1, Ht, 2, Wt, 2}).permute({1, 3, 5, 2, 4, 6, 0}).reshape({N, 4 * C});
        patches.push_back(pad_rows(p, pad));
        at::Tensor ids = grid_ids(1, Ht, Wt, caps.lens[static_cast<size_t>(i)] + 1);
        if (pad > 0) ids = at::cat({ids, at::zeros({pad, 3}, ids.options())}, 0);
        img_ids.push_back(ids);
    }
    at::Tensor x = layers::linear(at::cat(patches, 0), x_embed_);
    at::Tensor pad_mask = at::zeros({Np, 1}, at::TensorOptions().dtype(at::kBool));
    if (pad > 0) pad_mask.slice(0, N).fill_(true);
    x = at::where(pad_mask.to(x.device()).repeat({B, 1}), x_pad_, x).view({B, Np, -1});
    const at::Tensor x_freqs = freqs_of(img_ids);
    for (const auto& b : noise_refiner_) x = block(*b, x, at::Tensor(), x_freqs, adaln);

    // Unified sequence per item: [image rows (Np), caption rows (Lc_i)], zero-padded across the batch.
    std::vector<at::Tensor> unified, unified_ids;
    for (int64_t i = 0; i < B; ++i) {
        const int64_t Lc = caps.lens[static_cast<size_t>(i)];
        unified.push_back(at::cat({x[i], caps.feats[i].slice(0, 0, Lc)}, 0));
        unified_ids.push_back(at::cat({img_ids[static_cast<size_t>(i)], grid_ids(Lc, 1, 1, 1)}, 0));
    }
    at::Tensor mask;
    at::Tensor u = pad_batch(unified, &mask);
    const at::Tensor u_freqs = freqs_of(unified_ids);
    for (const auto& b : layers_) u = block(*b, u, mask, u_freqs, adaln);

    // Final layer: LayerNorm (no affine, eps 1e-6) * (1 + Linear(silu(adaln))), Linear to the patch features.
    const at::Tensor scale = (1.0 + layers::linear(at::silu(adaln), final_mod_)).unsqueeze(1);
    u = layers::linear(at::layer_norm(u, {c_.dim}, {}, {}, 1e-6) * scale, final_linear_);
    // Unpatchify the first N rows of each item: [N, 4C] -> [C, h, w].
    return u.slice(1, 0, N).reshape({B, Ht, Wt, 1, 2, 2, C}).permute({0, 6, 3, 1, 4, 2, 5}).reshape({B, C, h, w});
}

}  // namespace cn::zimage
