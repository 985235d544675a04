// The RMSNorm pair of an adaLN-modulated DiT block (Z-Image's sandwich norms) as one row pass each.
//
// Semantics, per row r of D elements of x [B, S, D] (row r belongs to item b = r / S), T = the dtype (F32, BF16,
// F16), fp32 arithmetic, rounded where the ATen ops they replace round:
//   n      = round_T(w[j] * round_T(y[j] * rsqrt(mean_j y^2 + eps)))    (layers::t5_rms_norm)
//   rms_norm_scale:      out = round_T(n * scale[b, j])                  (RMSNorm(x) * (1 + s), scale = 1 + s given)
//   add_gated_rms_norm:  x   = round_T(x + round_T(gate[b, j] * n(y)))   (x + tanh(g) * RMSNorm(y), gate = tanh(g)
//                                                                         given; x + n(y) when gate is undefined)
// The mean's fp32 sum runs in the kernel's own order (one fixed order per D), not ATen's, so results match the
// composite to a few fp32 ulps of the variance, not bit for bit. `scale` undefined: plain rms_norm.
//
// CPU path (the ATen composite over kernels/rms_norm.h's CPU norm) always; CUDA path when built with CUDA kernels.
// Tensors: x, y [B, S, D] contiguous; w [D]; scale / gate [B, D] contiguous; one dtype and device.
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::kernels {

at::Tensor rms_norm_scale(const at::Tensor& x, const at::Tensor& weight, double eps, const at::Tensor& scale);
void add_gated_rms_norm(at::Tensor& x, const at::Tensor& y, const at::Tensor& weight, double eps, const at::Tensor& gate);

at::Tensor rms_norm_scale_cpu(const at::Tensor& x, const at::Tensor& weight, double eps, const at::Tensor& scale);
void add_gated_rms_norm_cpu(at::Tensor& x, const at::Tensor& y, const at::Tensor& weight, double eps, const at::Tensor& gate);
#ifdef CN_WITH_CUDA
// out = n(y) * mul (mul [B, D] or null), then, when `residual`, out = residual + out (residual may alias out).
void modulated_norm_cuda(const at::Tensor& y, const at::Tensor& weight, double eps, const at::Tensor& mul, const at::Tensor& residual,
                         const at::Tensor& out);
#endif

}  // namespace cn::kernels
