// SwiGLU gate of a fused [w1 | w3] projection (Kronos' feed-forward: w2(silu(w1 x) * w3 x)).
//
// Semantics for x [R, 2F] of dtype T (F32, BF16, F16), a = x[:, :F], b = x[:, F:], fp32 arithmetic:
//   s      = round_T(a / (1 + exp(-a)))        (ATen's silu)
//   out    = round_T(s * b)                    [R, F], contiguous
// i.e. at::silu(a) * b op for op. The last dim of x must be contiguous; rows may have any stride.
//
// CPU path (the ATen composite itself) always; CUDA path when built with CUDA kernels.
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::kernels {

at::Tensor swiglu(const at::Tensor& x);
at::Tensor swiglu_cpu(const at::Tensor& x);
#ifdef CN_WITH_CUDA
at::Tensor swiglu_cuda(const at::Tensor& x);
#endif

}  // namespace cn::kernels
