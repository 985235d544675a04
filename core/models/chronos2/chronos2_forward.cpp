#include "core/models/chronos2/chronos2_forward.h"

#include <limits>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/arcsinh.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/nanmean.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/sinh.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

namespace cn::chronos2 {
namespace {

constexpr double kInstanceNormEps = 1e-5;

// T5-style RMS norm: variance in fp32, x * rsqrt(var + eps), rounded to the weight's dtype when that is
// half precision, then scaled by the weight.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
    const at::Tensor var = at::pow(x.to(at::kFloat), 2).mean(-1, /*keepdim=*/true);
    at::Tensor y = x * at::rsqrt(var + eps);
    if (weight.scalar_type() == at::kHalf || weight.scalar_type() == at::kBFloat16) y = y.to(weight.scalar_type());
    return weight * y;
}

// Linear layer applied to each series (index `dim` of x) with its own GEMM, so that a series' result
// never depends on which other series share the batch: one GEMM over all rows lets BLAS pick blocking
// and thread splits by the total row count, which changes the rounding. Batch invariance is what lets
// the server merge requests without changing any answer.
at::Tensor series_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}, int64_t dim = 0) {
    const int64_t n = x.size(dim);
    std::vector<at::Tensor> parts;
    parts.reserve(n);
    for (int64_t i = 0; i < n; ++i) parts.push_back(at::linear(x.select(dim, i), w, b));
    return at::stack(parts, dim);
}

at::Tensor residual_block(const ResidualBlockWeights& w, const at::Tensor& x) {
    const at::Tensor hid = at::relu(series_linear(x, w.hidden_w, w.hidden_b));
    const at::Tensor out = series_linear(hid, w.output_w, w.output_b);
    const at::Tensor res = series_linear(x, w.residual_w, w.residual_b);
    return out + res;
}

// "b s (h d) -> b h s d"
at::Tensor split_heads(const at::Tensor& x, int64_t heads, int64_t dk) {
    return x.view({x.size(0), x.size(1), heads, dk}).permute({0, 2, 1, 3});
}

// "b h s d -> b s (h d)"
at::Tensor merge_heads(const at::Tensor& x) {
    const at::Tensor t = x.permute({0, 2, 1, 3});
    return t.reshape({t.size(0), t.size(1), t.size(2) * t.size(3)});
}

at::Tensor rotate_half(const at::Tensor& x) {
    const int64_t half = x.size(-1) / 2;
    return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

// Left-pads the last dim with NaN to a multiple of p, then splits it into patches: [B, L] -> [B, P, p].
at::Tensor patch(const at::Tensor& x, int64_t p) {
    at::Tensor y = x;
    const int64_t len = x.size(-1);
    if (len % p != 0) {
        const at::Tensor pad = at::full({x.size(0), p - len % p}, std::numeric_limits<double>::quiet_NaN(), x.options());
        y = at::cat({pad, x}, -1);
    }
    return y.unfold(-1, p, p);
}

}  // namespace

double lowest(c10::ScalarType dt) {
    switch (dt) {
        case c10::kBFloat16: return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
        case c10::kHalf: return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
        default: return static_cast<double>(std::numeric_limits<float>::lowest());
    }
}

at::Tensor rope_inv_freq(const Chronos2Config& cfg, c10::Device device) {
    const int64_t dk = cfg.d_kv;
    return (1.0 / at::pow(cfg.rope_theta, at::arange(0, dk, 2, at::kLong).to(at::kFloat) / static_cast<double>(dk)))
        .to(device);
}

at::Tensor forward(const Chronos2Config& cfg, const Chronos2Weights& w, c10::ScalarType dt, const at::Tensor& context_in,
                   const at::Tensor& group_ids, const at::Tensor& future_covariates, int64_t N, bool singleton_groups) {
    const int64_t p = cfg.patch_size;
    const int64_t H = cfg.num_heads, dk = cfg.d_kv;
    const auto f32 = context_in.options().dtype(at::kFloat);
    const auto fdt = context_in.options().dtype(dt);

    // Context mask and truncation to the model's context length.
    at::Tensor context = context_in;
    at::Tensor mask = at::isnan(context).logical_not().to(at::kFloat);
    if (context.size(1) > cfg.context_length) {
        context = context.slice(1, context.size(1) - cfg.context_length);
        mask = mask.slice(1, mask.size(1) - cfg.context_length);
    }
    const int64_t B = context.size(0);

    // Instance normalisation in fp32 (NaN-aware population std; only an exactly zero scale is replaced).
    // Reduced one series at a time: a reduction over several rows may split each row differently across
    // threads than a reduction over one, and the result must not depend on the batch.
    at::Tensor loc, scale;
    {
        std::vector<at::Tensor> locs, scales;
        for (int64_t b = 0; b < B; ++b) {
            const at::Tensor row = context.slice(0, b, b + 1);
            const at::Tensor l = at::nan_to_num(at::nanmean(row, -1, /*keepdim=*/true), 0.0);
            locs.push_back(l);
            scales.push_back(at::nan_to_num((row - l).square().nanmean(-1, /*keepdim=*/true).sqrt(), 1.0));
        }
        loc = at::cat(locs, 0);
        scale = at::cat(scales, 0);
    }
    scale = at::where(scale == 0, at::full({}, kInstanceNormEps, f32), scale);
    at::Tensor z = (context - loc) / scale;
    if (cfg.use_arcsinh) z = at::arcsinh(z);
    z = z.to(dt);
    const at::Tensor mask_dt = mask.to(dt);

    // Patches: [time encoding | values | mask].
    const at::Tensor patched_mask = at::nan_to_num(patch(mask_dt, p), 0.0);
    const at::Tensor patched_ctx = at::where(patched_mask > 0.0, patch(z, p), at::zeros({}, fdt));
    const at::Tensor patch_valid = patched_mask.sum(-1) > 0;  // [B, P]
    const int64_t P = patch_valid.size(1);
    const at::Tensor ctx_time = at::arange(-P * p, 0, f32)
                                    .view({1, P, p})
                                    .expand({B, P, p})
                                    .div(cfg.time_encoding_scale)
                                    .to(dt);
    at::Tensor embeds = residual_block(w.input_embed, at::cat({ctx_time, patched_ctx, patched_mask}, -1));

    // REG token.
    const at::Tensor reg = w.shared.select(0, 1).view({1, 1, -1}).expand({B, 1, w.shared.size(1)});
    embeds = at::cat({embeds, reg}, 1);
    at::Tensor attention_mask = at::cat({patch_valid.to(dt), at::ones({B, 1}, fdt)}, -1);

    // Future tokens: [time encoding | covariate values | covariate mask].
    at::Tensor fut_vals, fut_mask;
    if (future_covariates.defined()) {
        at::Tensor fc = (future_covariates - loc) / scale;
        if (cfg.use_arcsinh) fc = at::arcsinh(fc);
        fc = fc.to(dt);
        at::Tensor fm = at::isnan(fc).logical_not().to(dt);
        fc = at::where(fm > 0.0, fc, at::zeros({}, fdt));
        const int64_t have = fc.size(1), want = N * p;
        if (have < want) {
            fc = at::cat({fc, at::zeros({B, want - have}, fdt)}, -1);
            fm = at::cat({fm, at::zeros({B, want - have}, fdt)}, -1);
        }
        fut_vals = fc.view({B, N, p});
        fut_mask = fm.view({B, N, p});
    } else {
        fut_vals = at::zeros({B, N, p}, fdt);
        fut_mask = at::zeros({B, N, p}, fdt);
    }
    const at::Tensor fut_time = at::arange(0, N * p, f32).view({1, N, p}).expand({B, N, p}).div(cfg.time_encoding_scale).to(dt);
    const at::Tensor fut_embeds = residual_block(w.input_embed, at::cat({fut_time, fut_vals, fut_mask}, -1));
    at::Tensor hidden = at::cat({embeds, fut_embeds}, 1);  // [B, S, D]
    attention_mask = at::cat({attention_mask, at::ones({B, N}, fdt)}, -1);
    const int64_t S = hidden.size(1);

    // Additive masks, shared by all layers.
    const double minv = lowest(dt);
    const at::Tensor time_mask = (1.0 - attention_mask.view({B, 1, 1, S})) * minv;
    at::Tensor group_mask;
    if (!singleton_groups) {
        const at::Tensor same = (group_ids.view({B, 1}) == group_ids.view({1, B})).to(dt);       // [q, b]
        const at::Tensor gtm = same.view({B, B, 1}) * attention_mask.view({1, B, S});            // [q, b, t]
        group_mask = (1.0 - gtm.permute({2, 0, 1}).unsqueeze(1)) * minv;                       // [t, 1, q, b]
    }

    // RoPE tables (fp32, then the model dtype), positions 0..S-1.
    const at::Tensor& inv_freq = w.inv_freq;  // no host work inside the pass: it can be captured in a CUDA graph
    const at::Tensor pos = at::arange(0, S, context.options().dtype(at::kLong)).view({1, 1, S}).to(at::kFloat);
    const at::Tensor freqs = at::matmul(inv_freq.view({1, -1, 1}), pos).transpose(1, 2);  // [1, S, dk/2]
    const at::Tensor emb = at::cat({freqs, freqs}, -1);
    const at::Tensor cos = emb.cos().to(dt).unsqueeze(1);  // [1, 1, S, dk]
    const at::Tensor sin = emb.sin().to(dt).unsqueeze(1);

    const double eps = cfg.layer_norm_epsilon;
    for (const auto& l : w.layers) {
        // Time self-attention (RoPE, unscaled).
        {
            const at::Tensor n = rms_norm(hidden, l.time_norm, eps);
            at::Tensor q = split_heads(series_linear(n, l.time_q), H, dk);
            at::Tensor k = split_heads(series_linear(n, l.time_k), H, dk);
            const at::Tensor v = split_heads(series_linear(n, l.time_v), H, dk);
            q = q * cos + rotate_half(q) * sin;
            k = k * cos + rotate_half(k) * sin;
            const at::Tensor a = at::scaled_dot_product_attention(q, k, v, time_mask, 0.0, false, /*scale=*/1.0);
            hidden = hidden + series_linear(merge_heads(a), l.time_o);
        }
        // Group self-attention: across the rows of a group, at each time step.
        {
            const at::Tensor ht = hidden.transpose(0, 1);  // [S, B, D]
            const at::Tensor n = rms_norm(ht, l.group_norm, eps);
            at::Tensor out;
            if (singleton_groups) {
                out = series_linear(series_linear(n, l.group_v, {}, 1), l.group_o, {}, 1);
            } else {
                const at::Tensor q = split_heads(series_linear(n, l.group_q, {}, 1), H, dk);
                const at::Tensor k = split_heads(series_linear(n, l.group_k, {}, 1), H, dk);
                const at::Tensor v = split_heads(series_linear(n, l.group_v, {}, 1), H, dk);
                const at::Tensor a = at::scaled_dot_product_attention(q, k, v, group_mask, 0.0, false, /*scale=*/1.0);
                out = series_linear(merge_heads(a), l.group_o, {}, 1);
            }
            hidden = (ht + out).transpose(0, 1);
        }
        // Feed-forward.
        {
            const at::Tensor n = rms_norm(hidden, l.ff_norm, eps);
            hidden = hidden + series_linear(at::relu(series_linear(n, l.ff_wi)), l.ff_wo);
        }
    }
    hidden = rms_norm(hidden, w.final_norm, eps);

    // Head on the last N tokens; quantile-major features "b n (q p) -> b q (n p)".
    const int64_t Q = static_cast<int64_t>(cfg.quantiles.size());
    const at::Tensor head = residual_block(w.output_embed, hidden.slice(1, S - N));
    at::Tensor preds = head.view({B, N, Q, p}).permute({0, 2, 1, 3}).reshape({B, Q, N * p});
    // Inverse normalisation in fp32.
    preds = preds.to(at::kFloat);
    if (cfg.use_arcsinh) preds = at::sinh(preds);
    preds = preds * scale.view({B, 1, 1}) + loc.view({B, 1, 1});
    return preds;
}

}  // namespace cn::chronos2
