// Every op below mirrors one op of the reference (file and function named), in its order and on tensors of the
// same shapes and strides: CPU kernels pick their path by contiguity (at::linear: addmm for a contiguous input,
// matmul + add_ otherwise) and reductions by layout, so a "same formula" rewrite would not give the same bits.
#include "core/models/toto/toto_forward.h"

#include <cmath>
#include <limits>

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include "core/common/status.h"

namespace cn::toto {
namespace {

// scaler.py compute_causal_statistics (dim -1, minimum_scale 0.1, Bessel correction) and CausalPatchStdMeanScaler:
// the float64 causal (Welford) mean and std, clamped to within 10^±e of the prefix's global std, taken at each
// patch's last step and repeated over the patch.
struct Scaled {
    at::Tensor scaled, loc, scale;
};
Scaled causal_patch_scale(const TotoConfig& c, const at::Tensor& data, const at::Tensor& padding_mask, int64_t prefix_length) {
    constexpr double kMinimumScale = 0.1;
    at::Tensor weights = at::ones_like(data) * padding_mask;
    const at::Tensor x = data.to(at::kDouble);
    const at::Tensor w = weights.to(at::kDouble);
    at::Tensor weighted = w * x;
    const at::Tensor cum_w = at::cumsum(w, -1);
    const at::Tensor cum_v = at::cumsum(weighted, -1);
    const at::Tensor den = cum_w.clamp_min(1.0);
    at::Tensor means = cum_v / den;
    at::Tensor shifted = at::zeros_like(means);
    const int64_t L = data.size(-1);
    shifted.narrow(-1, 1, L - 1).copy_(means.narrow(-1, 0, L - 1));
    const at::Tensor delta = x - shifted;
    const at::Tensor increment = delta * (x - means) * w;
    const at::Tensor m2 = at::cumsum(increment, -1);
    const at::Tensor variance = m2 / at::clamp(den - 1.0, 1.0);
    at::Tensor scale = at::sqrt(variance + kMinimumScale);
    if (c.stabilize_with_global) {
        at::Tensor pad = padding_mask;
        at::Tensor prefix_mask = at::zeros_like(weights);
        prefix_mask.narrow(-1, 0, std::min(prefix_length, L)).fill_(1.0);
        weighted = weighted * prefix_mask;
        weights = weights * prefix_mask;
        pad = pad * prefix_mask;
        const double smin = std::pow(10.0, -c.scale_factor_exponent), smax = std::pow(10.0, c.scale_factor_exponent);
        const at::Tensor gden = (weights * pad).sum(-1, /*keepdim=*/true).clamp_min(1.0);
        at::Tensor gmean = weighted.sum(-1, true) / gden;
        gmean = at::nan_to_num(gmean);
        const at::Tensor gvar = at::pow((x - gmean) * weights * pad, 2).sum(-1, true) / gden;
        const at::Tensor gscale = at::sqrt(gvar + kMinimumScale);
        const at::Tensor expanded = gscale.expand_as(scale);
        const at::Tensor lo = expanded * smin, hi = expanded * smax;
        const at::Tensor floor = at::scalar_tensor(kMinimumScale, at::TensorOptions().dtype(at::kFloat).device(scale.device()));
        scale = at::clamp(scale, at::maximum(floor, lo), hi);
    }
    means = means.to(data.scalar_type());
    scale = scale.to(data.scalar_type());
    const int64_t P = c.patch_size;
    auto per_patch = [&](const at::Tensor& t) {  // unfold(-1, P, P)[..., -1], repeated "b v p -> b v (p s)"
        const at::Tensor last = t.unfold(-1, P, P).select(-1, P - 1);
        return last.unsqueeze(-1).expand({last.size(0), last.size(1), last.size(2), P}).reshape({last.size(0), last.size(1), L});
    };
    Scaled s;
    s.loc = per_patch(means);
    s.scale = per_patch(scale);
    s.scaled = (data - s.loc) / s.scale;
    return s;
}

// nn.Linear as the reference runs it: its weight is an nn.Parameter, which requires grad even under no_grad, and
// at::matmul then folds a non-contiguous input of 3+ dims into one mm (a view when the leading dims allow it)
// before linear's add_ of the bias, where a weight without grad takes the batched path (other roundings).
// Contiguous inputs take addmm either way. The one non-contiguous input here is the cached decode step's patch.
at::Tensor param_linear(const at::Tensor& x, const layers::Linear& l) {
    if (x.dim() <= 2 || x.is_contiguous()) return at::linear(x, l.w, l.b);
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = l.w.size(0);
    at::Tensor out = at::_unsafe_view(at::mm(x.reshape({-1, x.size(-1)}), l.w.t()), shape);
    return out.add_(l.b);
}

// util.py RMSNorm (the Python path, eps 1e-8). Fused: ATen's rms_norm, one op (x * rsqrt rather than x / sqrt:
// equal up to rounding).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& scale, bool fused) {
    if (fused) return at::rms_norm(x, {x.size(-1)}, scale, 1e-8);
    const at::Tensor x_normed = x / at::sqrt(at::mean(x * x, {-1}, /*keepdim=*/true) + 1e-8);
    return x_normed * scale;
}

// rotary_embedding_torch rotate_half: pairs (x0, x1) -> (-x1, x0).
at::Tensor rotate_half(const at::Tensor& x) {
    std::vector<int64_t> pairs(x.sizes().begin(), x.sizes().end());
    pairs.back() /= 2;
    pairs.push_back(2);
    const at::Tensor r = x.reshape(pairs);
    const auto parts = r.unbind(-1);
    return at::stack({-parts[1], parts[0]}, -1).reshape(x.sizes());
}

// The rotary tables of one model call, shared by its time-wise layers (they all sit at the same offset): rope.py
// TimeAwareRotaryEmbedding.rotate_queries_and_keys computes them again in every layer with the same ops on the
// same inputs, so computing them once gives the same values. Positions offset .. offset + S - 1, xPos centred on
// floor(max position / 2) of this call.
struct RotaryTables {
    at::Tensor cos, sin, scale, inv_scale;  // [S, head_dim]
    // Fused mode: cos and sin times the scale (for q) and its inverse (for k), stacked [2, 1, 1, S, head_dim].
    at::Tensor qk_cos, qk_sin;
};

RotaryTables rotary_tables(const Rotary& rot, int64_t S, int64_t offset, c10::ScalarType dtype, bool fused) {
    // get_seq_pos (/ interpolate_factor 1 is exact); fp32 whatever the activations' dtype (bf16 holds integers
    // exactly only up to 256)
    const at::Tensor seq = at::arange(S, rot.freqs.options()) + offset;
    at::Tensor freqs = at::einsum("...,f->...f", {seq, rot.freqs});
    freqs = freqs.unsqueeze(-1).expand({S, freqs.size(-1), 2}).reshape({S, 2 * freqs.size(-1)});
    const at::Tensor power = (seq - at::floor_divide(std::get<0>(seq.max(-1)).unsqueeze(-1), 2)) / 512;
    at::Tensor scale = at::pow(rot.xpos, power.unsqueeze(-1));
    scale = at::cat({scale, scale}, -1).to(dtype);
    RotaryTables t{freqs.cos(), freqs.sin(), scale, at::pow(scale, -1), {}, {}};
    if (fused) {
        t.qk_cos = at::stack({t.cos * t.scale, t.cos * t.inv_scale}).unsqueeze(1).unsqueeze(1);
        t.qk_sin = at::stack({t.sin * t.scale, t.sin * t.inv_scale}).unsqueeze(1).unsqueeze(1);
    }
    return t;
}

// rotary_embedding_torch apply_rotary_emb over the whole head dimension (the empty left and right parts of its cat
// only copy). Fused mode rotates q and k together with the premultiplied tables instead (attention()).
at::Tensor apply_rotary(const RotaryTables& r, const at::Tensor& t, bool key) {
    const at::Tensor& scale = key ? r.inv_scale : r.scale;
    const at::Tensor out = (t * r.cos * scale) + (rotate_half(t) * r.sin * scale);
    return at::cat({t.narrow(-1, 0, 0), out, t.narrow(-1, t.size(-1), 0)}, -1).to(t.scalar_type());
}

// Attention as softmax(q k^T / sqrt(d)) v in three ATen ops: fused mode's path for a decode step's single query
// and for the few variates of a space-wise layer, where the fused SDPA kernels spend a 64-row tile on each
// (batch, head) (equal to SDPA up to rounding).
at::Tensor small_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    return at::matmul(at::softmax(at::matmul(q, k.transpose(-2, -1)) * scale, -1, at::kFloat).to(v.scalar_type()), v);
}

// attention.py BaseMultiheadAttention.forward without xformers; time-wise or space-wise.
at::Tensor attention(const TotoConfig& c, const Layer& l, const RotaryTables& rot, const at::Tensor& x, const at::Tensor& space_mask,
                     KvCache* cache, int64_t time_layer, bool fused) {
    const int64_t B = x.size(0), V = x.size(1), S = x.size(2), D = x.size(3), H = c.num_heads, hd = c.head_dim();
    if (!l.spacewise) {
        const at::Tensor xi = x.reshape({B * V, S, D});  // "b v s d -> (b v) s d"
        const at::Tensor qkv = at::linear(xi.contiguous(), l.qkv.w, l.qkv.b);
        // "bv s (qkv hd nh) -> qkv bv nh s hd": the split is head-minor
        const at::Tensor split = qkv.reshape({B * V, S, 3, hd, H}).permute({2, 0, 4, 1, 3});
        const auto parts = split.unbind(0);
        const int64_t offset = cache ? cache->length(time_layer) : 0;
        at::Tensor q, k, v = parts[2];
        if (fused) {  // q and k rotated in one pass over both
            const at::Tensor qk = split.narrow(0, 0, 2);
            const at::Tensor rotated = (qk * rot.qk_cos + rotate_half(qk) * rot.qk_sin).to(qk.scalar_type());
            q = rotated[0];
            k = rotated[1];
        } else {
            q = apply_rotary(rot, parts[0], /*key=*/false);
            k = apply_rotary(rot, parts[1], /*key=*/true);
        }
        if (cache) std::tie(k, v) = cache->append(time_layer, k, v);
        at::Tensor o;
        if (fused && S == 1) {
            o = small_attention(q, k, v.to(q.scalar_type()));  // strided cache slices: matmul takes them as they are
        } else {
            q = q.contiguous();
            k = k.contiguous().to(q.scalar_type());
            v = v.contiguous().to(q.scalar_type());
            o = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/offset == 0);
        }
        // "(b v) nh s hd -> b v s (nh hd)": the merge is head-major
        const at::Tensor merged = o.reshape({B, V, H, S, hd}).permute({0, 1, 3, 2, 4}).reshape({B, V, S, D});
        return at::linear(merged, l.out.w, l.out.b);
    }
    const at::Tensor xi = x.permute({0, 2, 1, 3}).reshape({B * S, V, D});  // "b v s d -> (b s) v d"
    const at::Tensor qkv = at::linear(xi.contiguous(), l.qkv.w, l.qkv.b);
    const auto parts = qkv.reshape({B * S, V, 3, hd, H}).permute({2, 0, 4, 1, 3}).unbind(0);
    const at::Tensor q = parts[0].contiguous();
    const at::Tensor k = parts[1].contiguous().to(q.scalar_type());
    const at::Tensor v = parts[2].contiguous().to(q.scalar_type());
    // Fused: a task's variates all see each other (the id mask is all zeros), so the all-true mask is dropped.
    const at::Tensor o =
        fused && V <= 64 ? small_attention(q, k, v) : at::scaled_dot_product_attention(q, k, v, space_mask, 0.0, /*is_causal=*/false);
    const at::Tensor merged =
        o.reshape({B, S, H, V, hd}).permute({0, 3, 1, 2, 4}).reshape({B, V, S, D});  // "(b s) nh v hd -> b v s (nh hd)"
    return at::linear(merged, l.out.w, l.out.b);
}

// transformer.py TransformerLayer.forward: pre-norm attention and SwiGLU (the gate is the first half).
at::Tensor layer(const TotoConfig& c, const Layer& l, const RotaryTables& rot, const at::Tensor& x, const at::Tensor& space_mask,
                 KvCache* cache, int64_t time_layer, bool fused) {
    const at::Tensor h = x + attention(c, l, rot, rms_norm(x, l.norm1, fused), space_mask, cache, time_layer, fused).contiguous();
    const at::Tensor u = at::linear(rms_norm(h, l.norm2, fused), l.up.w, l.up.b);
    const auto gv = u.chunk(2, -1);
    const at::Tensor z = at::silu(gv[0]) * gv[1];
    return h + at::linear(z, l.down.w, l.down.b);
}

}  // namespace

Rotary make_rotary(int64_t head_dim, c10::Device device) {
    Rotary r;
    // RotaryEmbedding.__init__ ('lang'): 1. / (theta ** (arange(0, dim, 2)[:dim // 2].float() / dim)), theta 10000.0
    const at::Tensor exponents = at::arange(0, head_dim, 2, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat) / head_dim;
    r.freqs = at::pow(c10::Scalar(10000.0), exponents).reciprocal() * 1.0;
    // xPos: (arange(0, dim, 2) + 0.4 * dim) / (1.4 * dim), int64 + double -> fp32
    const at::Tensor ar = at::arange(0, head_dim, 2, at::TensorOptions().dtype(at::kLong).device(device));
    r.xpos = (ar + 0.4 * static_cast<double>(head_dim)) / (1.4 * static_cast<double>(head_dim));
    return r;
}

KvCache::KvCache(const TotoConfig& cfg, int64_t rows, int64_t max_patches, c10::Device device, c10::ScalarType dtype) : max_(max_patches) {
    const int64_t n = std::max<int64_t>(1, cfg.time_layers());
    const auto o = at::TensorOptions().dtype(dtype).device(device);
    keys_ = at::zeros({n, rows, cfg.num_heads, max_patches, cfg.head_dim()}, o);
    values_ = at::zeros_like(keys_);
    len_.assign(static_cast<size_t>(n), 0);
}

std::pair<at::Tensor, at::Tensor> KvCache::append(int64_t tl, const at::Tensor& k, const at::Tensor& v) {
    int64_t& len = len_[static_cast<size_t>(tl)];
    const int64_t n = k.size(2);
    if (len + n > max_) fail(Status::kInternal, "toto: KV cache of " + std::to_string(max_) + " patches exceeded");
    keys_[tl].narrow(2, len, n).copy_(k);
    values_[tl].narrow(2, len, n).copy_(v);
    len += n;
    return {keys_[tl].narrow(2, 0, len), values_[tl].narrow(2, 0, len)};
}

void KvCache::fill_repeated(const KvCache& src, int64_t copies) {
    const int64_t rows = src.keys_.size(1);
    if (keys_.size(1) != rows * copies || src.len_.size() != len_.size() || src.max_ > max_) {
        fail(Status::kInternal, "toto: KV cache repetition of mismatched shapes");
    }
    for (size_t tl = 0; tl < len_.size(); ++tl) {
        const int64_t n = src.len_[tl];
        const int64_t t = static_cast<int64_t>(tl);
        auto dst = [&](const at::Tensor& all) { return all[t].view({copies, rows, all.size(2), max_, all.size(4)}).narrow(3, 0, n); };
        dst(keys_).copy_(src.keys_[t].narrow(2, 0, n).unsqueeze(0));
        dst(values_).copy_(src.values_[t].narrow(2, 0, n).unsqueeze(0));
        len_[tl] = n;
    }
}

void KvCache::copy_from(const KvCache& src) {
    if (!keys_.sizes().equals(src.keys_.sizes())) fail(Status::kInternal, "toto: KV cache copy of mismatched shapes");
    keys_.copy_(src.keys_);
    values_.copy_(src.values_);
    len_ = src.len_;
}

void KvCache::reset() {
    keys_.zero_();
    values_.zero_();
    std::fill(len_.begin(), len_.end(), 0);
}

Mixture forward(const TotoConfig& c, const TotoWeights& w, const Rotary& rot, const at::Tensor& inputs, const at::Tensor& padding_mask,
                int64_t prefix_length, KvCache* cache, Trace* trace, bool fused) {
    const int64_t P = c.patch_size, D = c.embed_dim;
    // backbone.py TotoBackbone.backbone
    const Scaled s = causal_patch_scale(c, inputs, padding_mask, prefix_length);
    at::Tensor scaled = s.scaled;
    if (cache) {
        const int64_t prefix = P * cache->length(0);
        scaled = scaled.narrow(-1, prefix, scaled.size(-1) - prefix);  // a view: the decode step's embedding is matmul + add_
    }
    // embedding.py PatchEmbedding
    // The scaler runs on fp32 inputs; a bf16 model's network starts at the patch embedding.
    at::Tensor x = param_linear(scaled.to(w.patch_embed.w.scalar_type()).unfold(-1, P, P), w.patch_embed);
    if (trace) {
        trace->loc = s.loc;
        trace->scale = s.scale;
        trace->scaled = s.scaled;
        trace->embed = x;
    }
    // transformer.py Transformer.forward: the space-wise mask from the id mask (all zeros: a task's variates all see
    // each other), [B * S, heads, V, V] bool, contiguous.
    const int64_t B = x.size(0), V = x.size(1), S = x.size(2);
    bool any_space = false;
    for (const Layer& l : w.layers) any_space = any_space || l.spacewise;
    at::Tensor space_mask;  // fused mode's small attentions take none (the all-true mask is no mask)
    if (any_space && !(fused && V <= 64)) {
        space_mask = at::ones({B * S, 1, V, V}, at::TensorOptions().dtype(at::kBool).device(x.device()))
                         .expand({B * S, c.num_heads, V, V})
                         .contiguous();
    }
    const RotaryTables tables = rotary_tables(rot, S, cache ? cache->length(0) : 0, x.scalar_type(), fused);
    int64_t time_layer = 0;
    for (const Layer& l : w.layers) {
        x = layer(c, l, tables, x, space_mask, cache, time_layer, fused);
        if (!l.spacewise) ++time_layer;
        if (trace) trace->layers.push_back(x);
    }
    // Unembedding: "b v n (p e) -> b v (n p) e"
    const at::Tensor u = at::linear(x, w.unembed.w, w.unembed.b).reshape({B, V, S * P, D});
    // distribution.py MixtureOfStudentTsOutput
    const double eps = std::numeric_limits<float>::epsilon();
    Mixture m;
    // The mixture's parameters and everything after them in fp32 (a no-op for fp32 models): a bf16 model samples
    // in fp32, with the same draws as an fp32 one.
    auto head = [&](const layers::Linear& l) { return at::linear(u, l.w, l.b).to(at::kFloat); };
    m.df = at::softplus(head(w.df)).clamp_min(eps) + 2.0;
    m.loc = head(w.loc);
    m.scale = at::softplus(head(w.scale)).clamp_min(eps);
    const at::Tensor probs = at::softmax(head(w.mixture_weights), -1);
    m.probs = probs / probs.sum(-1, /*keepdim=*/true);  // torch.distributions.Categorical(probs=...)
    m.patch_loc = s.loc;
    m.patch_scale = s.scale;
    if (trace) {
        trace->df = m.df;
        trace->loc_k = m.loc;
        trace->scale_k = m.scale;
        trace->probs = m.probs;
    }
    return m;
}

Mixture repeat_rows(const Mixture& m, int64_t copies) {
    auto rep = [&](const at::Tensor& t) {
        std::vector<int64_t> e(t.sizes().begin(), t.sizes().end()), r = e;
        e.insert(e.begin(), copies);
        r[0] *= copies;
        return t.unsqueeze(0).expand(e).reshape(r);
    };
    return Mixture{rep(m.df), rep(m.loc), rep(m.scale), rep(m.probs), rep(m.patch_loc), rep(m.patch_scale)};
}

at::Tensor sample(const Mixture& m, at::Generator& gen) {
    const int64_t R = m.df.size(0), V = m.df.size(1), T = m.df.size(2), K = m.df.size(3);
    // MixtureSameFamily.sample: Categorical.sample, then the components' rsample. The component index is
    // torch.multinomial(p, 1, replacement=True)'s own path for one draw, written out (ATen: exponential_ draws q,
    // argmax of p / q) without its host-side validity check, a synchronisation no CUDA graph can hold: the same
    // draws, the same index (probs are finite and non-negative by construction).
    const at::Tensor p2 = m.probs.reshape({-1, K});
    const at::Tensor q = at::empty_like(p2).exponential_(1.0, gen);
    const at::Tensor idx = at::argmax(p2 / q, -1, /*keepdim=*/true).t().reshape({R, V, T});
    // StudentT.rsample: X ~ N(0, 1); Z ~ Chi2(df) = Gamma(df / 2, rate 0.5); loc + scale * X * rsqrt(Z / df)
    const at::Tensor X = at::empty({R, V, T, K}, m.df.options()).normal_(0.0, 1.0, gen);
    const at::Tensor concentration = m.df * 0.5;
    at::Tensor Z = at::_standard_gamma(concentration.expand({R, V, T, K}), gen) / at::full({}, 0.5, m.df.options()).expand({R, V, T, K});
    Z.clamp_(std::numeric_limits<float>::min());
    const at::Tensor Y = X * at::rsqrt(Z / m.df);
    const at::Tensor comp = m.loc + m.scale * Y;
    const at::Tensor chosen = at::gather(comp, 3, idx.reshape({R, V, T, 1}).repeat({1, 1, 1, 1})).squeeze(3);
    // AffineTransformed over the last T steps: loc + scale * x
    const int64_t L = m.patch_loc.size(-1);
    return m.patch_loc.narrow(-1, L - T, T) + m.patch_scale.narrow(-1, L - T, T) * chosen;
}

at::Tensor mean(const Mixture& m) {
    // MixtureSameFamily.mean (StudentT.mean is loc for df > 1, always here), then AffineTransformed.mean.
    const at::Tensor base = at::sum(m.probs * m.loc.clone(at::MemoryFormat::Contiguous), {-1});
    const int64_t L = m.patch_loc.size(-1), T = m.df.size(2);
    return base * m.patch_scale.narrow(-1, L - T, T) + m.patch_loc.narrow(-1, L - T, T);
}

at::Tensor replace_extreme(const at::Tensor& t) {
    const double big = static_cast<double>(std::numeric_limits<float>::max()) / 2;
    const at::Tensor extreme = at::logical_or(at::logical_or(at::isinf(t), at::isnan(t)), t.abs() >= big);
    return at::where(extreme, at::scalar_tensor(0.0, t.options()), t);
}

}  // namespace cn::toto
