#include "core/models/chronos2/chronos2_forward.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/arcsinh.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/sinh.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "core/layers/attention.h"
#include "core/layers/linear.h"
#include "core/layers/mlp.h"
#include "core/layers/norm.h"
#include "core/layers/rope.h"
#include "kernels/chronos2_io.h"
#include "kernels/series_linear.h"

namespace cn::chronos2 {
namespace {

constexpr double kInstanceNormEps = 1e-5;

// A linear layer applied to each series (index `dim` of x) by GEMM calls of its own, so that a series' result
// depends neither on the other series nor on the thread count (kernels/series_linear.h). Batch invariance is
// what lets the server merge requests without changing any answer.
at::Tensor series_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}, int64_t dim = 0) {
    return kernels::series_linear(x, w, b, dim);
}

// The same as a layers::LinearOp (series along dim 0), for the shared blocks.
at::Tensor per_series_linear(const at::Tensor& x, const layers::Linear& l) { return kernels::series_linear(x, l.w, l.b, 0); }

// An elementwise op applied to each series (row `b` of dim 0) by its own ATen call. ATen's CPU loops run the
// vectorised form of an op over whole vectors and the scalar form over the tail, and for transcendental ops
// (sinh, arcsinh) the two can differ in the last bit: over the whole batch, which form a value gets would
// depend on its position in the batch.
template <class Op>
at::Tensor per_series(const at::Tensor& x, const Op& op) {
    if (x.is_cuda()) return op(x);  // CUDA kernels apply the same code to every element
    std::vector<at::Tensor> parts;
    parts.reserve(x.size(0));
    for (int64_t b = 0; b < x.size(0); ++b) parts.push_back(op(x.select(0, b).contiguous()));
    return at::stack(parts, 0);
}

at::Tensor residual_block(const ResidualBlockWeights& w, const at::Tensor& x) {
    const at::Tensor hid = at::relu(series_linear(x, w.hidden_w, w.hidden_b));
    const at::Tensor out = series_linear(hid, w.output_w, w.output_b);
    const at::Tensor res = series_linear(x, w.residual_w, w.residual_b);
    return out + res;
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

at::Tensor group_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                           const at::Tensor& group_ids) {
    if (q.is_cuda()) return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, /*scale=*/1.0);
    // Rows by group id, in batch order within each group (the order the group has when it is alone).
    const at::Tensor ids = group_ids.to(at::kCPU, at::kLong).contiguous();
    const int64_t* id = ids.const_data_ptr<int64_t>();
    std::vector<std::pair<int64_t, std::vector<int64_t>>> groups;
    for (int64_t b = 0; b < ids.numel(); ++b) {
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == id[b]; });
        if (it == groups.end()) {
            groups.push_back({id[b], {}});
            it = std::prev(groups.end());
        }
        it->second.push_back(b);
    }
    at::Tensor out = at::empty(q.sizes(), q.options());
    for (const auto& g : groups) {
        const at::Tensor idx = at::tensor(g.second, at::kLong);
        if (g.second.size() == 1) {  // one key: softmax gives it weight 1 exactly, so the output is v
            out.index_copy_(2, idx, v.index_select(2, idx));
            continue;
        }
        const at::Tensor m = mask.index_select(2, idx).index_select(3, idx);
        const at::Tensor a = at::scaled_dot_product_attention(q.index_select(2, idx), k.index_select(2, idx), v.index_select(2, idx), m,
                                                              0.0, false, /*scale=*/1.0);
        out.index_copy_(2, idx, a);
    }
    return out;
}

double lowest(c10::ScalarType dt) {
    switch (dt) {
        case c10::kBFloat16: return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
        case c10::kHalf: return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
        default: return static_cast<double>(std::numeric_limits<float>::lowest());
    }
}

at::Tensor forward(const Chronos2Config& cfg, const Chronos2Weights& w, c10::ScalarType dt, const at::Tensor& context_in,
                   const at::Tensor& group_ids, const at::Tensor& future_covariates, int64_t N, bool singleton_groups) {
    const int64_t p = cfg.patch_size;
    const int64_t H = cfg.num_heads;
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

    // Instance normalisation in fp32 (NaN-aware population std; only an exactly zero scale is replaced): the
    // reference's nanmean statistics in its summation order, row by row, on every device (kernels/chronos2_io.h),
    // so a constant series takes the reference's branch and a row never depends on the others.
    const kernels::Chronos2Stats stats = kernels::chronos2_instance_stats(context.contiguous(), kInstanceNormEps);
    const at::Tensor loc = stats.loc.view({B, 1}), scale = stats.scale.view({B, 1});
    at::Tensor z = (context - loc) / scale;
    if (cfg.use_arcsinh) z = per_series(z, [](const at::Tensor& t) { return at::arcsinh(t); });
    z = z.to(dt);
    const at::Tensor mask_dt = mask.to(dt);

    // Patches: [time encoding | values | mask].
    const at::Tensor patched_mask = at::nan_to_num(patch(mask_dt, p), 0.0);
    const at::Tensor patched_ctx = at::where(patched_mask > 0.0, patch(z, p), at::zeros({}, fdt));
    const at::Tensor patch_valid = patched_mask.sum(-1) > 0;  // [B, P]
    const int64_t P = patch_valid.size(1);
    const at::Tensor ctx_time = at::arange(-P * p, 0, f32).view({1, P, p}).expand({B, P, p}).div(cfg.time_encoding_scale).to(dt);
    at::Tensor embeds = residual_block(w.input_embed, at::cat({ctx_time, patched_ctx, patched_mask}, -1));

    // REG token.
    const at::Tensor reg = w.shared.select(0, 1).view({1, 1, -1}).expand({B, 1, w.shared.size(1)});
    embeds = at::cat({embeds, reg}, 1);
    at::Tensor attention_mask = at::cat({patch_valid.to(dt), at::ones({B, 1}, fdt)}, -1);

    // Future tokens: [time encoding | covariate values | covariate mask].
    at::Tensor fut_vals, fut_mask;
    if (future_covariates.defined()) {
        at::Tensor fc = (future_covariates - loc) / scale;
        if (cfg.use_arcsinh) fc = per_series(fc, [](const at::Tensor& t) { return at::arcsinh(t); });
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
        const at::Tensor same = (group_ids.view({B, 1}) == group_ids.view({1, B})).to(dt);  // [q, b]
        const at::Tensor gtm = same.view({B, B, 1}) * attention_mask.view({1, B, S});       // [q, b, t]
        group_mask = (1.0 - gtm.permute({2, 0, 1}).unsqueeze(1)) * minv;                    // [t, 1, q, b]
    }

    // RoPE tables (fp32, then the model dtype), positions 0..S-1; w.inv_freq is on the device already (no host
    // work inside the pass: it can be captured in a CUDA graph).
    const layers::RopeTables rope = layers::rope_tables(w.inv_freq, 0, S, dt);

    const double eps = cfg.layer_norm_epsilon;
    for (const auto& l : w.layers) {
        // Time self-attention (RoPE, unscaled).
        {
            const at::Tensor n = layers::t5_rms_norm(hidden, l.time_norm, eps);
            const at::Tensor q = layers::apply_rope(layers::split_heads(series_linear(n, l.time_q), H), rope);
            const at::Tensor k = layers::apply_rope(layers::split_heads(series_linear(n, l.time_k), H), rope);
            const at::Tensor v = layers::split_heads(series_linear(n, l.time_v), H);
            const at::Tensor a = layers::attention(q, k, v, time_mask, false, /*scale=*/1.0);
            hidden = hidden + series_linear(layers::merge_heads(a), l.time_o);
        }
        // Group self-attention: across the rows of a group, at each time step.
        {
            const at::Tensor ht = hidden.transpose(0, 1);  // [S, B, D]
            const at::Tensor n = layers::t5_rms_norm(ht, l.group_norm, eps);
            at::Tensor out;
            if (singleton_groups) {
                out = series_linear(series_linear(n, l.group_v, {}, 1), l.group_o, {}, 1);
            } else {
                const at::Tensor q = layers::split_heads(series_linear(n, l.group_q, {}, 1), H);
                const at::Tensor k = layers::split_heads(series_linear(n, l.group_k, {}, 1), H);
                const at::Tensor v = layers::split_heads(series_linear(n, l.group_v, {}, 1), H);
                const at::Tensor a = group_attention(q, k, v, group_mask, group_ids);
                out = series_linear(layers::merge_heads(a), l.group_o, {}, 1);
            }
            hidden = (ht + out).transpose(0, 1);
        }
        // Feed-forward.
        {
            const at::Tensor n = layers::t5_rms_norm(hidden, l.ff_norm, eps);
            hidden = hidden + layers::relu_mlp(n, {l.ff_wi, {}}, {l.ff_wo, {}}, per_series_linear);
        }
    }
    hidden = layers::t5_rms_norm(hidden, w.final_norm, eps);

    // Head on the last N tokens; quantile-major features "b n (q p) -> b q (n p)".
    const int64_t Q = static_cast<int64_t>(cfg.quantiles.size());
    const at::Tensor head = residual_block(w.output_embed, hidden.slice(1, S - N));
    at::Tensor preds = head.view({B, N, Q, p}).permute({0, 2, 1, 3}).reshape({B, Q, N * p});
    // Inverse normalisation in fp32.
    preds = preds.to(at::kFloat);
    if (cfg.use_arcsinh) preds = per_series(preds, [](const at::Tensor& t) { return at::sinh(t); });
    preds = preds * scale.view({B, 1, 1}) + loc.view({B, 1, 1});
    return preds;
}

}  // namespace cn::chronos2
