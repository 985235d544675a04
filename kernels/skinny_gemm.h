// Linear layer for a few rows (decode steps): out = x · wᵀ + b for x [M, K] with M <= 16.
//
// Semantics, dtype T (F32, BF16, F16) for x, w, b and out: out[m, n] = round_T(sum_k x[m,k] w[n,k] + b[n]) with
// the products and the sum in fp32 (one rounding at the end), i.e. at::linear up to the order of the fp32 sum.
// x [M, K] and w [N, K] contiguous, b [N] or undefined. cuBLAS picks split-K GEMV kernels plus a reduction
// for these shapes (two launches, ~4-7 µs on an H100); this is one launch: a warp per two output columns,
// 16-byte loads of w and x, no shared memory and no barrier.
//
// skinny_linear_fits(x, w): whether the CUDA path takes these shapes (M <= 16, K a multiple of 8, x and w
// 16-byte aligned); `skinny_linear` falls back to at::linear otherwise, and on CPU.
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::kernels {

bool skinny_linear_fits(const at::Tensor& x, const at::Tensor& w);
at::Tensor skinny_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
#ifdef CN_WITH_CUDA
at::Tensor skinny_linear_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
#endif

}  // namespace cn::kernels
