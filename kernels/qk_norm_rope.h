// Per-head q/k RMSNorm, complex multi-axis RoPE and the attention layout in one pass over a packed q|k|v
// projection (Z-Image's attention processor after its fused QKV GEMM).
//
// Semantics, for qkv [B, S, 3 H hd] (q | k | v along the last dim, contiguous), per (b, s, head) vector x of hd
// elements of q (weight q_w) and of k (weight k_w), T = the dtype (F32, BF16, F16), fp32 arithmetic:
//   n      = round_T(w[j] * round_T(x[j] * rsqrt(mean_j x^2 + eps)))      (layers::t5_rms_norm; skipped, n = x,
//                                                                          when the weights are undefined)
//   (o[2p], o[2p+1]) = round_T((n[2p] + i n[2p+1]) * freqs[b, s, p])        (layers::apply_complex_rope: fp32
//                                                                          complex product, rounded once)
// written as q, k [B, H, S, hd] contiguous (what SDPA reads without a copy), and v copied into the same layout. The
// CUDA path's mean sums in its own order (a few fp32 ulps of the variance from ATen's); the CPU path is the ATen
// composite itself.
//
// freqs: [B, S, hd / 2] complex64 contiguous, on the same device.
#pragma once

#include <cstdint>
#include <tuple>

#include <ATen/core/Tensor.h>

namespace cn::kernels {

// Returns (q, k, v).
std::tuple<at::Tensor, at::Tensor, at::Tensor> qk_norm_rope(const at::Tensor& qkv, int64_t heads, const at::Tensor& q_w,
                                                            const at::Tensor& k_w, double eps, const at::Tensor& freqs);
std::tuple<at::Tensor, at::Tensor, at::Tensor> qk_norm_rope_cpu(const at::Tensor& qkv, int64_t heads, const at::Tensor& q_w,
                                                                const at::Tensor& k_w, double eps, const at::Tensor& freqs);
#ifdef CN_WITH_CUDA
void qk_norm_rope_cuda(const at::Tensor& qkv, int64_t heads, const at::Tensor& q_w, const at::Tensor& k_w, double eps,
                       const at::Tensor& freqs, const at::Tensor& q_out, const at::Tensor& k_out, const at::Tensor& v_out);
#endif

}  // namespace cn::kernels
