#include "core/models/kronos/kronos_forward.h"

#include <cmath>
#include <limits>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/zeros.h>

#include "core/common/status.h"
#include "core/layers/attention.h"
#include "core/layers/linear.h"
#include "core/layers/mlp.h"
#include "core/layers/norm.h"
#include "core/layers/rope.h"
#include "kernels/kronos_embed.h"
#include "kernels/kv_cache.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"
#include "kernels/skinny_gemm.h"
#include "kernels/swiglu.h"

namespace cn::kronos {
namespace {

using layers::Linear;
using layers::linear;
using layers::merge_heads;
using layers::split_heads;

constexpr double kNormEps = 1e-5;  // RMSNorm's eps (module.py), in the reference ops and the kernels alike

// RMSNorm in the activations' dtype (fp32: the reference's precision; a bf16 model rounds each op to bf16, as a
// bf16 copy of the reference would).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w) { return layers::rms_norm(x, w, kNormEps); }

// RotaryPositionalEmbedding.forward: the table is built for the *query* length and applied to q and k (tables in
// the activations' dtype: a no-op in fp32; bf16 models round them like a bf16 reference).
std::pair<at::Tensor, at::Tensor> rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& inv_freq) {
    const layers::RopeTables t = layers::rope_tables(inv_freq, 0, q.size(-2), q.scalar_type());
    return {layers::apply_rope(q, t), layers::apply_rope(k, t)};
}

// RoPE at positions pos0 .. pos0 + L - 1 (the reference's table for a window of length pos0 + L, rows pos0..).
at::Tensor rope_at(const at::Tensor& x, const at::Tensor& inv_freq, int64_t pos0) {
    return layers::apply_rope(x, layers::rope_tables(inv_freq, pos0, x.size(-2), x.scalar_type()));
}

// decode_s1's input: HierarchicalEmbedding (both token embeddings scaled by sqrt(d), fused) plus
// TemporalEmbedding (stamp columns minute, hour, weekday, day, month; summed in the reference's order).
at::Tensor embed_tokens(const PredictorConfig& cfg, const PredictorWeights& w, const at::Tensor& s1, const at::Tensor& s2,
                        const at::Tensor& stamp) {
    const double scale = std::sqrt(static_cast<double>(cfg.d_model));
    const at::Tensor e1 = at::embedding(w.emb_s1, s1) * scale;
    const at::Tensor e2 = at::embedding(w.emb_s2, s2) * scale;
    const at::Tensor x = linear(at::cat({e1, e2}, -1), w.fusion);
    const at::Tensor st = stamp.to(at::kLong);
    const at::Tensor te = at::embedding(w.hour, st.select(-1, 1)) + at::embedding(w.weekday, st.select(-1, 2)) +
                          at::embedding(w.day, st.select(-1, 3)) + at::embedding(w.month, st.select(-1, 4)) +
                          at::embedding(w.minute, st.select(-1, 0));
    return x + te;
}

at::Tensor block(const Block& b, const at::Tensor& x_in) {
    at::Tensor x = x_in;
    {
        const at::Tensor n = rms_norm(x, b.norm1);
        auto [q, k] = rope(split_heads(linear(n, b.q), b.heads), split_heads(linear(n, b.k), b.heads), b.inv_freq);
        const at::Tensor v = split_heads(linear(n, b.v), b.heads);
        const at::Tensor a = layers::attention(q, k, v, {}, /*causal=*/true);
        x = x + linear(merge_heads(a), b.o);
    }
    const at::Tensor n = rms_norm(x, b.norm2);
    return x + layers::swiglu_mlp(n, b.w1, b.w3, b.w2);
}

// Path::kKernels's block over x [B, L, d], the residual stream, updated in place (an owned contiguous tensor):
// `delta` is the residual branch not yet added (the previous block's feed-forward output, added by this
// block's first norm), and this block leaves its own there. With caches, the rotated keys and the values of
// positions pos0 .. pos0 + L - 1 are stored and the queries attend over cache rows 0 .. pos0 + L - 1 (causal
// when L > 1, which only happens from pos0 = 0).
void block_kernels(const Block& b, at::Tensor& x, at::Tensor& delta, int64_t pos0 = 0, const at::Tensor& k_cache = {},
                   const at::Tensor& v_cache = {}) {
    if (!b.qkv.w.defined() || !b.w13.w.defined())
        fail(Status::kInternal, "Kronos kernels path: the fused weights are built for CUDA models only");
    const int64_t B = x.size(0), L = x.size(1), d = x.size(2), H = b.heads, hd = d / H, F = b.w2.w.size(1);
    const at::Tensor n = delta.defined() ? kernels::add_rms_norm(x, delta, b.norm1, kNormEps) : kernels::rms_norm(x, b.norm1, kNormEps);
    const at::Tensor qkv = linear(n, b.qkv).view({B, L, 3, H, hd});
    kernels::rope_(qkv.view({B, L, 3 * H, hd}).narrow(2, 0, 2 * H), b.inv_freq, pos0);  // q and k in place: [B, L, 2H, hd]
    const at::Tensor q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2), v = qkv.select(2, 2).transpose(1, 2);
    at::Tensor a;
    if (k_cache.defined()) {
        k_cache.narrow(2, pos0, L).copy_(k);
        v_cache.narrow(2, pos0, L).copy_(v);
        a = layers::attention(q, k_cache.narrow(2, 0, pos0 + L), v_cache.narrow(2, 0, pos0 + L), {}, /*causal=*/L > 1);
    } else {
        a = layers::attention(q, k, v, {}, /*causal=*/true);
    }
    delta = linear(merge_heads(a), b.o);  // [B, L, d]
    const at::Tensor n2 = kernels::add_rms_norm(x, delta, b.norm2, kNormEps);
    delta = linear(kernels::swiglu(linear(n2, b.w13).view({B * L, 2 * F})), b.w2).view({B, L, d});
}

// The blocks of a sequence pass on `path`; x is the embedded input (owned), returned after the last block.
at::Tensor blocks(const std::vector<Block>& bs, at::Tensor x, Path path) {
    if (path == Path::kReference) {
        for (const auto& b : bs) x = block(b, x);
        return x;
    }
    at::Tensor delta;
    for (const auto& b : bs) block_kernels(b, x, delta);
    if (delta.defined()) x.add_(delta);
    return x;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> tokenizer_encode(const TokenizerConfig& cfg, const TokenizerWeights& w, const at::Tensor& x, Path path) {
    at::Tensor z = linear(blocks(w.encoder, linear(x, w.embed), path), w.quant_embed);
    // BSQuantizer: F.normalize, sign (0 -> -1), bits (q >= 0) little-endian into s1 (first half) and s2.
    z = z / z.norm(2, -1, /*keepdim=*/true).clamp_min(1e-12).expand_as(z);
    const at::Tensor bits = (z > 0).to(at::kLong);
    const int64_t h = cfg.s1_bits;
    const at::Tensor weights = at::pow(2, at::arange(h, bits.options()));
    return {(bits.slice(-1, 0, h) * weights).sum(-1), (bits.slice(-1, h) * weights).sum(-1)};
}

at::Tensor tokenizer_decode(const TokenizerConfig& cfg, const TokenizerWeights& w, const at::Tensor& s1, const at::Tensor& s2, Path path) {
    const int64_t dim = cfg.s1_bits + cfg.s2_bits;
    const at::Tensor mask = at::pow(2, at::arange(dim / 2, s1.options()));
    const at::Tensor b1 = (s1.unsqueeze(-1).bitwise_and(mask)) != 0;
    const at::Tensor b2 = (s2.unsqueeze(-1).bitwise_and(mask)) != 0;
    at::Tensor q = at::cat({b1, b2}, -1).to(w.post_quant_embed.w.scalar_type()) * 2 - 1;
    q = q * (1. / std::pow(static_cast<double>(dim), 0.5));
    return linear(blocks(w.decoder, linear(q, w.post_quant_embed), path), w.head);
}

std::pair<at::Tensor, at::Tensor> decode_s1(const PredictorConfig& cfg, const PredictorWeights& w, const at::Tensor& s1,
                                            const at::Tensor& s2, const at::Tensor& stamp, Path path) {
    at::Tensor x = blocks(w.blocks, embed_tokens(cfg, w, s1, s2, stamp), path);
    x = path == Path::kKernels ? kernels::rms_norm(x, w.norm, kNormEps) : rms_norm(x, w.norm);
    return {linear(x, w.proj_s1), x};
}

at::Tensor decode_s2(const PredictorConfig& cfg, const PredictorWeights& w, const at::Tensor& context, const at::Tensor& s1) {
    const at::Tensor sib = at::embedding(w.emb_s1, s1);  // raw: no sqrt(d) scale
    auto [q, k] = rope(split_heads(linear(sib, w.dep_q), w.dep_heads), split_heads(linear(context, w.dep_k), w.dep_heads), w.dep_inv_freq);
    const at::Tensor v = split_heads(linear(context, w.dep_v), w.dep_heads);
    const at::Tensor a = layers::attention(q, k, v, {}, /*causal=*/false);
    const at::Tensor x2 = rms_norm(context + linear(merge_heads(a), w.dep_o), w.dep_norm);
    return linear(x2, w.proj_s2);
}

std::pair<at::Tensor, at::Tensor> decode_s1_cached(const PredictorConfig& cfg, const PredictorWeights& w, const at::Tensor& s1,
                                                   const at::Tensor& s2, const at::Tensor& stamp, KronosCache& c, int64_t capacity,
                                                   Path path) {
    const int64_t N = s1.size(0), Lnew = s1.size(1), pos0 = c.len, end = pos0 + Lnew;
    at::Tensor x = embed_tokens(cfg, w, s1, s2, stamp);
    if (c.k.empty()) {
        const int64_t H = w.blocks.empty() ? 1 : w.blocks[0].heads, hd = cfg.d_model / H, dh = cfg.d_model / w.dep_heads;
        for (size_t l = 0; l < w.blocks.size(); ++l) {
            c.k.push_back(at::zeros({N, H, capacity, hd}, x.options()));
            c.v.push_back(at::zeros({N, H, capacity, hd}, x.options()));
        }
        c.dep_k = at::zeros({N, w.dep_heads, capacity, dh}, x.options());
        c.dep_v = at::zeros({N, w.dep_heads, capacity, dh}, x.options());
    }
    if (path == Path::kKernels) {
        at::Tensor delta;
        for (size_t l = 0; l < w.blocks.size(); ++l) block_kernels(w.blocks[l], x, delta, pos0, c.k[l], c.v[l]);
        x = delta.defined() ? kernels::add_rms_norm(x, delta, w.norm, kNormEps) : kernels::rms_norm(x, w.norm, kNormEps);
        if (!w.dep_kv.w.defined()) fail(Status::kInternal, "Kronos kernels path: the fused weights are built for CUDA models only");
        const at::Tensor kv = linear(x, w.dep_kv).view({N, Lnew, 2, w.dep_heads, cfg.d_model / w.dep_heads});
        c.dep_k.narrow(2, pos0, Lnew).copy_(kv.select(2, 0).transpose(1, 2));
        c.dep_v.narrow(2, pos0, Lnew).copy_(kv.select(2, 1).transpose(1, 2));
        c.len = end;
        const at::Tensor last = x.narrow(1, Lnew - 1, 1);
        return {linear(last.squeeze(1), w.proj_s1), last};
    }
    for (size_t l = 0; l < w.blocks.size(); ++l) {
        const Block& b = w.blocks[l];
        const at::Tensor n = rms_norm(x, b.norm1);
        const at::Tensor q = rope_at(split_heads(linear(n, b.q), b.heads), b.inv_freq, pos0);
        c.k[l].narrow(2, pos0, Lnew).copy_(rope_at(split_heads(linear(n, b.k), b.heads), b.inv_freq, pos0));
        c.v[l].narrow(2, pos0, Lnew).copy_(split_heads(linear(n, b.v), b.heads));
        // A single new token attends to every cached one (no mask); a prefill is causal from position 0.
        const at::Tensor a = layers::attention(q, c.k[l].narrow(2, 0, end), c.v[l].narrow(2, 0, end), {}, /*causal=*/Lnew > 1);
        x = x + linear(merge_heads(a), b.o);
        const at::Tensor n2 = rms_norm(x, b.norm2);
        x = x + layers::swiglu_mlp(n2, b.w1, b.w3, b.w2);
    }
    x = rms_norm(x, w.norm);
    c.dep_k.narrow(2, pos0, Lnew).copy_(split_heads(linear(x, w.dep_k), w.dep_heads));
    c.dep_v.narrow(2, pos0, Lnew).copy_(split_heads(linear(x, w.dep_v), w.dep_heads));
    c.len = end;
    const at::Tensor last = x.narrow(1, Lnew - 1, 1);  // [N, 1, d]
    return {linear(last.squeeze(1), w.proj_s1), last};
}

at::Tensor decode_s2_cached(const PredictorConfig& cfg, const PredictorWeights& w, const at::Tensor& context_last, const at::Tensor& s1,
                            const KronosCache& c) {
    const at::Tensor q = split_heads(linear(at::embedding(w.emb_s1, s1), w.dep_q), w.dep_heads);  // RoPE of length 1: identity
    const at::Tensor a = layers::attention(q, c.dep_k.narrow(2, 0, c.len), c.dep_v.narrow(2, 0, c.len), {}, /*causal=*/false);
    const at::Tensor x2 = rms_norm(context_last + linear(merge_heads(a), w.dep_o), w.dep_norm);
    return linear(x2.squeeze(1), w.proj_s2);
}

namespace {

// The reference's filter before the draw: logits / temperature in fp32 (bf16 models too), then top-k (k > 0;
// top-p is then NOT applied, as in the reference) or top-p (< 1), softmax. `fused`: the top-p filter on
// cutenative's kernel (the captured step); otherwise the ATen composite, op for op as the reference.
at::Tensor filtered_probs(const at::Tensor& logits_in, double temperature, int64_t top_k, double top_p, bool fused) {
    at::Tensor logits = logits_in.to(at::kFloat) / temperature;
    if (top_k > 0) {
        const int64_t k = std::min<int64_t>(top_k, logits.size(-1));
        const at::Tensor kth = std::get<0>(at::topk(logits, k)).select(-1, k - 1).unsqueeze(-1);
        logits.masked_fill_(logits < kth, -std::numeric_limits<double>::infinity());
    } else if (top_p < 1.0) {
        return fused ? kernels::top_p_probs(logits, top_p) : kernels::top_p_probs_cpu(logits, top_p);
    }
    return at::softmax(logits, -1);
}

// sample_from_logits on cutenative's kernels: the same generator call (one exponential_ of [N, V] fp32 per
// draw), the filter and the draw (top-p: one launch after the noise, which does not depend on the logits; the
// temperature by ATen's division, skipped at 1); when hist is defined the token also goes to hist[:, pos + 1].
at::Tensor sample_static(const at::Tensor& logits, double temperature, int64_t top_k, double top_p, at::Generator& gen,
                         const at::Tensor& hist, const at::Tensor& pos) {
    if (top_k <= 0 && top_p < 1.0) {
        const at::Tensor lf = logits.to(at::kFloat).contiguous();
        const at::Tensor noise = at::empty_like(lf).exponential_(1, gen);
        return kernels::top_p_draw(lf, temperature, top_p, noise, hist, pos);
    }
    const at::Tensor probs = filtered_probs(logits, temperature, top_k, top_p, /*fused=*/true);
    const at::Tensor noise = at::empty_like(probs).exponential_(1, gen);
    return kernels::draw_token(probs, noise, hist, pos);
}

}  // namespace

void decode_step_static(const PredictorConfig& cfg, const PredictorWeights& w, KronosStepState& st, double temperature, int64_t top_k,
                        double top_p, at::Generator& gen) {
    if (!w.dep_kv.w.defined() || (!w.blocks.empty() && !w.blocks[0].qkv.w.defined())) {
        fail(Status::kInternal, "decode_step_static: the fused weights are built for CUDA models only");
    }
    KronosCache& c = st.cache;
    const int64_t N = st.hist1.size(0), d = cfg.d_model;
    // Linear layers of N rows: one skinny-GEMM launch each (kernels/skinny_gemm.h; cuBLAS beyond 16 rows), with
    // the norm before and the SwiGLU gate or the residual add after folded in.
    using Opt = kernels::SkinnyOptions;
    auto lin = [](const Linear& l, const at::Tensor& x, const Opt& o = {}) { return kernels::skinny_linear(x, l.w, l.b, o); };
    auto normed = [](const at::Tensor& g, bool swiglu = false) {  // RMS norm (weight g) of the input first (SwiGLU after)
        Opt o;
        o.norm_weight = g;
        o.swiglu = swiglu;
        return o;
    };
    auto plus = [](const at::Tensor& r) {  // the residual r added to the output
        Opt o;
        o.residual = r;
        return o;
    };
    // The input token at pos and its stamp -> [N, d]: the residual stream, a new tensor after every add.
    at::Tensor x =
        lin(w.fusion, kernels::kronos_token_embed(st.hist1, st.hist2, st.pos, w.emb_s1, w.emb_s2, std::sqrt(static_cast<double>(d))));
    kernels::kronos_add_time_(x, st.stamps, st.pos, {w.minute, w.hour, w.weekday, w.day, w.month});
    for (size_t l = 0; l < w.blocks.size(); ++l) {
        const Block& b = w.blocks[l];
        const int64_t H = b.heads, hd = d / H;
        const at::Tensor qkv = lin(b.qkv, x, normed(b.norm1)).view({N, 3, H, hd});
        const at::Tensor a = kernels::decode_attention_append(qkv.select(1, 0), qkv.select(1, 1), qkv.select(1, 2), c.k[l], c.v[l], st.pos,
                                                              b.inv_freq, 1.0 / std::sqrt(static_cast<double>(hd)));
        x = lin(b.o, a, plus(x));
        const at::Tensor h = lin(b.w13, x, normed(b.norm2, /*swiglu=*/true));  // w1|w3 and w2: no biases
        x = lin(b.w2, h, plus(x));
    }
    const at::Tensor xn = kernels::rms_norm(x, w.norm, kNormEps);
    const int64_t dh = d / w.dep_heads;
    const at::Tensor kv = lin(w.dep_kv, xn).view({N, 2, w.dep_heads, dh});
    const at::Tensor s1 = sample_static(lin(w.proj_s1, xn), temperature, top_k, top_p, gen, st.hist1, st.pos);
    // RoPE of the one-row query is the identity; the dependency keys are not rotated (appended as they are).
    Opt lookup;  // the s1 embedding rows of the drawn tokens, looked up by the GEMM itself
    lookup.rows = s1.view({-1});
    const at::Tensor q2 = kernels::skinny_linear(w.emb_s1, w.dep_q.w, w.dep_q.b, lookup).view({N, w.dep_heads, dh});
    const at::Tensor a2 = kernels::decode_attention_append(q2, kv.select(1, 0), kv.select(1, 1), c.dep_k, c.dep_v, st.pos, {},
                                                           1.0 / std::sqrt(static_cast<double>(dh)));
    const at::Tensor x2 = lin(w.dep_o, a2, plus(xn));
    sample_static(lin(w.proj_s2, x2, normed(w.dep_norm)), temperature, top_k, top_p, gen, st.hist2, st.pos);
    st.pos.add_(1);
}

at::Tensor sample_from_logits(const at::Tensor& logits, double temperature, int64_t top_k, double top_p, at::Generator& gen) {
    const at::Tensor probs = filtered_probs(logits, temperature, top_k, top_p, /*fused=*/false);
    // at::multinomial(probs, 1) is, for one draw, argmax(probs / q) with q ~ Exp(1) drawn by exponential_ from
    // the generator: the same computation here (draw_token's ATen path), minus its validity checks, which read
    // the probabilities back to the host (two synchronisations per draw on a GPU). The probabilities come from a
    // softmax of logits with at least one finite entry, so they are valid. Tests check the draws against the
    // reference's.
    const at::Tensor q = at::empty_like(probs).exponential_(1, gen);
    return kernels::draw_token_cpu(probs, q);
}

at::Tensor sample_kernels(const at::Tensor& logits, double temperature, int64_t top_k, double top_p, at::Generator& gen) {
    return sample_static(logits, temperature, top_k, top_p, gen, {}, {});
}

}  // namespace cn::kronos
