// Chronos-2's forward pass on cutenative's kernels (fused mode): the same network as forward() with
//   - one pass per series for the input transform (instance norm, arcsinh, patching, masks; the token features
//     with the REG token's slot, so the input embedding writes the hidden state's layout) and one for the output
//     transform (rearrange, sinh, un-scaling), kernels/chronos2_io.h;
//   - the residual adds in the epilogue of the output projections' GEMMs (kernels/series_linear.h,
//     series_linear_accumulate; the same bits as a separate add: in f32 by construction, in bf16 as measured on the
//     H100), except the group attention's with groups, fused with the RMS norm after it (kernels/rms_norm.h);
//   - one QKV projection per attention (the three weights concatenated at load); the time attention by
//     kernels/rope_attention.h on its output (bf16/f16 on CUDA: one tensor-core kernel with RoPE folded in; else
//     RoPE in place and SDPA);
//   - with singleton groups, the group attention's value and output projections as one weight (group_vo);
//   - linear layers written straight into their output (no per-series stacking copy), ReLU in the GEMM's
//     epilogue where the GEMM has one (kernels/rows_gemm.h), else in place;
//   - the last layer, after its time attention, on the N future tokens alone (the only ones the head reads).
// Linear layers are batch-invariant (kernels/series_linear.h) and every other kernel reduces per row, so a
// series' forecast never depends on the rest of the batch (the server's exact merges rely on it). Results differ
// from forward() by rounding only; docs/benchmarks.md states the tolerance.

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>

#include "core/layers/attention.h"
#include "core/models/chronos2/chronos2_forward.h"
#include "kernels/chronos2_io.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/rope_attention.h"
#include "kernels/series_linear.h"

namespace cn::chronos2 {
namespace {

// x [B, R, K] -> [B, R, O] and x [S, B, K] -> [S, B, O] (group attention's layout): GEMMs per series written into
// the output, batch- and thread-invariant (kernels/series_linear.h).
at::Tensor rows_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}, bool relu = false) {
    return kernels::series_linear(x, w, b, 0, relu);
}

at::Tensor group_linear(const at::Tensor& x, const at::Tensor& w) { return kernels::series_linear(x, w, {}, 1); }

at::Tensor residual_block(const ResidualBlockWeights& w, const at::Tensor& x) {
    const at::Tensor hid = rows_linear(x, w.hidden_w, w.hidden_b, /*relu=*/true);
    at::Tensor out = rows_linear(hid, w.output_w, w.output_b);
    out.add_(rows_linear(x, w.residual_w, w.residual_b));
    return out;
}

}  // namespace

at::Tensor forward_fused(const Chronos2Config& cfg, const Chronos2Weights& w, c10::ScalarType dt, const at::Tensor& context_in,
                         const at::Tensor& group_ids, const at::Tensor& future_covariates, int64_t N, bool singleton_groups) {
    const int64_t p = cfg.patch_size, H = cfg.num_heads, dk = cfg.d_kv;
    at::Tensor context = context_in;
    if (context.size(1) > cfg.context_length) context = context.slice(1, context.size(1) - cfg.context_length);
    const int64_t B = context.size(0);

    kernels::Chronos2PrepParams prm;
    prm.patch = p;
    prm.output_patches = N;
    prm.time_scale = cfg.time_encoding_scale;
    prm.arcsinh = cfg.use_arcsinh;
    prm.dtype = dt;
    prm.reg_slot = true;
    const kernels::Chronos2Prep prep = kernels::chronos2_preprocess(
        context.contiguous(), future_covariates.defined() ? future_covariates.contiguous() : at::Tensor(), prm);
    const int64_t P = prep.context_patches, S = P + 1 + N;

    // Token embeddings of context and future patches in one pass, written around the REG token's slot (feats has a
    // row of zeros there), which then gets the REG embedding: no concatenation.
    at::Tensor hidden = residual_block(w.input_embed, prep.feats);  // [B, S, D]
    hidden.select(1, P).copy_(w.shared.select(0, 1));

    at::Tensor group_mask;
    if (!singleton_groups) {
        const at::Tensor same = (group_ids.view({B, 1}) == group_ids.view({1, B})).to(dt);  // [q, b]
        const at::Tensor gtm = same.view({B, B, 1}) * prep.valid.view({1, B, S});           // [q, b, t]
        group_mask = (1.0 - gtm.permute({2, 0, 1}).unsqueeze(1)) * lowest(dt);              // [t, 1, q, b]
    }

    const at::Tensor rope_cs = kernels::rope_table(w.inv_freq, S, dt);  // shared by the layers
    const double eps = cfg.layer_norm_epsilon;
    // A block's output projection adds into `hidden` in its GEMM's epilogue (the residual add); where it cannot (the
    // group attention's output, in another row order), `delta` holds it until the next norm adds it.
    at::Tensor delta;
    auto add_linear = [&](const at::Tensor& x, const at::Tensor& weight) { kernels::series_linear_accumulate(x, weight, hidden); };
    auto norm = [&](const at::Tensor& weight) {
        if (!delta.defined()) return kernels::rms_norm(hidden, weight, eps);
        const at::Tensor n = kernels::add_rms_norm(hidden, delta, weight, eps);
        delta = at::Tensor();
        return n;
    };
    for (size_t li = 0; li < w.layers.size(); ++li) {
        const LayerWeights& l = w.layers[li];
        {
            // time self-attention (RoPE, unscaled)
            const at::Tensor qkv = rows_linear(norm(l.time_norm), l.time_qkv);  // [B, S, 3 I]
            at::Tensor a = kernels::rope_attention(qkv, prep.time_bias, w.inv_freq, H, rope_cs);
            if (li + 1 == w.layers.size()) {
                // Only the N future tokens' last-layer outputs reach the head, and after the time attention (whose
                // keys and values are every token's) nothing mixes tokens of one series: the rest of the last
                // layer runs on those N tokens alone. Exact: on CUDA each kept row gets the same arithmetic as
                // before (rows_gemm and the norms compute every row on its own), so forecasts keep their bits; on
                // the CPU a series' GEMMs have N rows instead of S, which may round another way in the last bit
                // (the same for every batch).
                hidden = hidden.slice(1, S - N).contiguous();
                a = a.slice(1, S - N);
            }
            add_linear(a, l.time_o);
        }
        const int64_t T = hidden.size(1);  // tokens still computed: S, or N in the last layer
        {                                  // group self-attention across the rows of a group, at each time step
            const at::Tensor n = norm(l.group_norm);
            if (singleton_groups) {
                add_linear(n, l.group_vo);  // o(v(n)) as one product (LayerWeights::group_vo)
            } else {
                const at::Tensor qkv = group_linear(n.transpose(0, 1), l.group_qkv).view({T, B, 3, H, dk});
                const at::Tensor q = qkv.select(2, 0).permute({0, 2, 1, 3});
                const at::Tensor k = qkv.select(2, 1).permute({0, 2, 1, 3});
                const at::Tensor v = qkv.select(2, 2).permute({0, 2, 1, 3});
                const at::Tensor a = group_attention(q, k, v, group_mask.slice(0, S - T), group_ids);
                delta = group_linear(layers::merge_heads(a), l.group_o).transpose(0, 1).contiguous();
            }
        }
        {  // feed-forward
            const at::Tensor n = norm(l.ff_norm);
            add_linear(rows_linear(n, l.ff_wi, {}, /*relu=*/true), l.ff_wo);
        }
    }
    const at::Tensor out = norm(w.final_norm);

    const int64_t Q = static_cast<int64_t>(cfg.quantiles.size());
    const at::Tensor head = residual_block(w.output_embed, out.slice(1, out.size(1) - N));  // [B, N, Q p]
    return kernels::chronos2_postprocess(head, prep.loc, prep.scale, Q, p, cfg.use_arcsinh);
}

}  // namespace cn::chronos2
