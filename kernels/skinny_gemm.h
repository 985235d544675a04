// Linear layer for a few rows (decode steps): out = x · wᵀ + b for x [M, K] with M <= 16, optionally with the
// RMS norm before it and a residual add or the SwiGLU gate after it, in the same launch.
//
// Semantics, dtype T (F32, BF16, F16) for x, w, b, out and the options' tensors: out[m, n] = round_T(sum_k
// x[m,k] w[n,k] + b[n]) with the products and the sum in fp32 (one rounding at the end), i.e. at::linear up to
// the order of the fp32 sum. x [M, K] and w [N, K] contiguous, b [N] or undefined. cuBLAS picks split-K GEMV
// kernels plus a reduction for these shapes (two launches, ~4-7 µs on an H100); this is one launch: a warp per
// two output columns, 16-byte loads of w and x, no shared memory and no barrier.
//
// SkinnyOptions, each as the unfused kernels compute it, with the same roundings to T:
//   norm_weight [K]: x is replaced by rms_norm(x, norm_weight, norm_eps) first (kernels/rms_norm.h: fp32
//                    variance of the row, round_T(g * round_T(x * rsqrt(var + eps)))). In fp32 the CUDA path
//                    applies rsqrt(var + eps) after the sum (sum_k (g_k x_k) w_nk times it): the same value up to
//                    fp32 rounding, and no barrier for the row statistics;
//   swiglu:          w is a fused [w1 | w3] of 2F rows and the result is swiglu(x · wᵀ + b) [M, F]
//                    (kernels/swiglu.h on the rounded GEMM output: round_T(round_T(silu(a)) * b));
//   residual [M, N]: out = round_T(residual + round_T(x · wᵀ + b)) (the residual add of a pre-norm block); not
//                    with swiglu;
//   rows [M] int64:  x is a table [V, K] and the input's row m is x[rows[m]] (an embedding lookup in front;
//                    indices outside [0, V) are clamped by the CUDA path and refused by the composite).
//
// skinny_linear_fits(x, w): whether the CUDA path takes these shapes (M <= 16, K a multiple of 8, x and w
// contiguous and 16-byte aligned); `skinny_linear` falls back to the unfused ATen / kernels ops otherwise (also
// for a norm weight that is not 16-byte aligned), and on CPU. The CUDA path is a programmatic dependent launch
// (kernels/cuda_util.cuh): it fetches its weight rows into L2 while the previous kernel finishes.
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::kernels {

struct SkinnyOptions {
    at::Tensor norm_weight;  // defined: RMS norm of x first
    double norm_eps = 1e-5;
    bool swiglu = false;  // w = [w1 | w3]: swiglu of the result
    at::Tensor residual;  // defined: added to the result
    at::Tensor rows;      // defined: x is a table, the input rows are x[rows]
};

bool skinny_linear_fits(const at::Tensor& x, const at::Tensor& w);
// With SkinnyOptions::rows: the table [V, K] and w as above, rows int64 [M <= 16] contiguous on the same device.
bool skinny_table_fits(const at::Tensor& table, const at::Tensor& w, const at::Tensor& rows);
at::Tensor skinny_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const SkinnyOptions& opt = {});
// The unfused composite (kernels/rms_norm.h, swiglu.h, at::linear, an ATen add) on any device.
at::Tensor skinny_linear_composite(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const SkinnyOptions& opt = {});
#ifdef CN_WITH_CUDA
at::Tensor skinny_linear_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const SkinnyOptions& opt = {});
#endif

}  // namespace cn::kernels
