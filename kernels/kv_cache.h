// KV cache for one-token decode steps whose position lives on the device (so a captured CUDA graph can
// advance it): append the new token's keys/values (with RoPE), and attend from the new token over the cache.
//
// Shapes: N rows, H heads, head dim hd, cache capacity M; dtype T (F32, BF16, F16) for every tensor but
// `pos` (int64 [1] on the same device; the token's position p = pos[0], 0 <= p < M) and `inv_freq` (fp32
// [hd/2]). q, k, v are [N, H, hd] views with a contiguous last dim (e.g. slices of one fused QKV projection);
// caches are [N, H, M, hd] contiguous.
//
// rope_kv_append_: when inv_freq is defined, q (if defined) is rotated in place and k rotated at position p,
//   exactly as kernels/rope.h does (same per-op rounding); then k_cache[:, :, p] = k', v_cache[:, :, p] = v.
//   Without inv_freq, k and v are copied as they are (q must then be undefined). The CUDA path writes nothing
//   for a position outside [0, M) (the CPU path refuses it); decode_attention clamps it into [0, M).
// decode_attention: out[n, h*hd + i] = sum_{j <= p} softmax_j(scale * q[n,h]·k_cache[n,h,j]) v_cache[n,h,j,i]
//   with fp32 scores, softmax and sums, rounded to T once at the end: scaled_dot_product_attention of the one
//   query over the first p + 1 cache rows, up to the order of the fp32 sums. Result [N, H * hd] contiguous
//   (the heads already merged).
// decode_attention_append: rope_kv_append_(q, k, v, caches, pos, inv_freq), then decode_attention(q, caches,
//   pos, scale), in one launch on CUDA (each (row, head) block appends its own cache row before it attends):
//   the same values as the two calls, bit for bit.
//
// CPU paths (ATen composites: rope_, index_copy_, scaled_dot_product_attention with a mask) always; CUDA
// paths when built with CUDA kernels (decode_attention's CUDA path: M <= 8192 and hd <= 256).
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::kernels {

void rope_kv_append_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& pos, const at::Tensor& inv_freq);
at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& pos, double scale);
at::Tensor decode_attention_append(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache,
                                   const at::Tensor& v_cache, const at::Tensor& pos, const at::Tensor& inv_freq, double scale);

void rope_kv_append_cpu_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache,
                         const at::Tensor& v_cache, const at::Tensor& pos, const at::Tensor& inv_freq);
at::Tensor decode_attention_cpu(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& pos,
                                double scale);
#ifdef CN_WITH_CUDA
void rope_kv_append_cuda_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache,
                          const at::Tensor& v_cache, const at::Tensor& pos, const at::Tensor& inv_freq);
// k, v undefined: attention only; defined: the append first (decode_attention_append).
at::Tensor decode_attention_cuda(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& pos,
                                 double scale, const at::Tensor& k = {}, const at::Tensor& v = {}, const at::Tensor& inv_freq = {});
#endif

}  // namespace cn::kernels
