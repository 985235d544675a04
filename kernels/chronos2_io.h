// Chronos-2's input and output transforms, each one pass per series:
//
// chronos2_preprocess — NaN-aware instance norm, arcsinh, left padding, patching, masks:
//   for each row b of context [B, L] (fp32, NaN = missing; L already cut to the model's context length):
//     loc   = mean of the non-NaN values (0 when there are none; +-Inf -> +-FLT_MAX as nan_to_num does)
//     scale = sqrt(mean of (x - loc)^2 over the non-NaN values) (1 when none; exactly 0 -> eps)
//     z     = arcsinh((x - loc) / scale) (or without arcsinh), rounded to T
//   the row is left-padded with NaN to P = ceil(L / p) patches; each context patch token gets the
//   features [time | value | mask] (3p values of dtype T): time = (j - P p) / time_scale for padded
//   position j, value = z or 0 where missing, mask = 1 or 0. Future covariates [B, F] (optional) are
//   transformed with the same loc/scale into N future tokens: time = j / time_scale (j = 0..N p - 1),
//   value = z or 0, mask = 1 where known (positions past F are unknown).
//   Outputs: feats [B, P + N, 3p] (context tokens, then future tokens; with reg_slot [B, P + 1 + N, 3p], a row of
//   zeros at P where the REG token goes, so the embedding's output is the hidden state's layout), valid [B, P + 1 + N] (1 for a
//   patch with any observed value, for the REG token and for every future token; else 0), time_bias
//   [B, P + 1 + N] (0 where valid, the dtype's lowest value elsewhere: the additive attention mask),
//   loc and scale [B] fp32.
//   loc and the variance are the reference's InstanceNorm statistics bit for bit: fp32 nansum in ATen's CPU
//   summation order (kernels/cascade_sum.h), divided by the count in fp32, on every device; scale is the
//   variance's IEEE square root (the reference's CPU sqrt, MKL's vector math, is within 1 ulp of it), so the
//   eps branch is always the reference's. A constant series thus gets the reference's loc (one ulp off its
//   value, say) and the reference's tiny non-zero scale, and normalises to the same -1/0/+1 values; values
//   whose fp32 squares overflow get the reference's saturated scale (FLT_MAX). Each row's statistics depend
//   on that row alone (its NaN padding included: a call pads every row to its longest one).
//
// chronos2_instance_stats — loc and scale [B] fp32 of context [B, L] as above, alone (eager mode's
//   normalisation uses them, so every mode normalises with the same bits).
//
// chronos2_postprocess — head [B, N, Q p] (dtype T, "b n (q p)") to predictions [B, Q, N p] fp32:
//   y = v (or sinh v) * scale + loc, rounded after the multiply and after the add (no fused multiply-add),
//   as the reference computes it.
//
// CPU path always; CUDA path when built with CUDA kernels.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace cn::kernels {

struct Chronos2PrepParams {
    int64_t patch = 0;           // p
    int64_t output_patches = 0;  // N
    double time_scale = 1.0;     // time_encoding_scale
    bool arcsinh = true;
    double eps = 1e-5;      // replaces an exactly zero scale
    bool reg_slot = false;  // feats gets a zero row at P for the REG token
    c10::ScalarType dtype = c10::kFloat;
};

struct Chronos2Prep {
    at::Tensor feats, valid, time_bias, loc, scale;
    int64_t context_patches = 0;  // P
};

Chronos2Prep chronos2_preprocess(const at::Tensor& context, const at::Tensor& future, const Chronos2PrepParams& p);
struct Chronos2Stats {
    at::Tensor loc, scale;
};
Chronos2Stats chronos2_instance_stats(const at::Tensor& context, double eps);
at::Tensor chronos2_postprocess(const at::Tensor& head, const at::Tensor& loc, const at::Tensor& scale, int64_t quantiles, int64_t patch,
                                bool arcsinh);

Chronos2Prep chronos2_preprocess_cpu(const at::Tensor& context, const at::Tensor& future, const Chronos2PrepParams& p);
Chronos2Stats chronos2_instance_stats_cpu(const at::Tensor& context, double eps);
at::Tensor chronos2_postprocess_cpu(const at::Tensor& head, const at::Tensor& loc, const at::Tensor& scale, int64_t quantiles,
                                    int64_t patch, bool arcsinh);

#ifdef CN_WITH_CUDA
// Fill the outputs allocated by the dispatcher (shapes as above).
void chronos2_preprocess_cuda(const at::Tensor& context, const at::Tensor& future, const Chronos2PrepParams& p, Chronos2Prep& out);
void chronos2_instance_stats_cuda(const at::Tensor& context, double eps, Chronos2Stats& out);
void chronos2_postprocess_cuda(const at::Tensor& head, const at::Tensor& loc, const at::Tensor& scale, int64_t quantiles, int64_t patch,
                               bool arcsinh, const at::Tensor& out);
#endif

}  // namespace cn::kernels
