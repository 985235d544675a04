// T5-style RMS norm (Chronos-2's T5LayerNorm), optionally fused with the residual add before it.
//
// Semantics, per row r of D elements, T = the tensors' dtype (F32, BF16 or F16), all arithmetic in fp32:
//   var   = mean_j x[r,j]^2                       (x read as fp32)
//   y     = x[r,j] * rsqrt(var + eps)             rounded to T when T is half precision
//   out   = round_T(weight[j] * y)
// This is the reference's op order (variance in fp32, rounding to the weight's dtype before the weight
// multiply). The fp32 sum's order differs from ATen's reduction, so results match the ATen composite to a
// few fp32 ulps of the variance, not bit for bit. Each row is reduced by one thread block (CUDA; one warp in calls of
// 4096 rows or more, in the block's order: kernels/rms_norm.cu) or one loop (CPU) whose order depends only on D: a
// row's result never depends on the other rows of the call.
//
// CPU path always; CUDA path when built with CUDA kernels (CN_WITH_CUDA). Tensors: x [..., D] contiguous,
// weight [D] contiguous, same dtype and device.
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::kernels {

// Returns rms_norm(x) as a new tensor shaped like x.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// h = round_T(h + delta) in place (h and delta of the same shape), then returns rms_norm(h).
at::Tensor add_rms_norm(at::Tensor& h, const at::Tensor& delta, const at::Tensor& weight, double eps);

// The CPU paths (used as such on CPU tensors, and by tests).
at::Tensor rms_norm_cpu(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor add_rms_norm_cpu(at::Tensor& h, const at::Tensor& delta, const at::Tensor& weight, double eps);

#ifdef CN_WITH_CUDA
// `h_out`, when defined, receives round_T(x + delta) (it may alias x); `delta` may be undefined, and when it is
// defined `h_out` must be too.
void rms_norm_cuda(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& h_out, const at::Tensor& weight, double eps,
                   const at::Tensor& out);
#endif

}  // namespace cn::kernels
