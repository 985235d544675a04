// Token sampling without host round trips (for captured decode steps): the top-p filter + softmax after a
// sort, and the multinomial draw from pre-drawn exponential noise.
//
// top_p_probs(logits [N, V] fp32 contiguous, top_p) -> probs [N, V]: the reference's top-p filter and softmax
//   op for op (fp32), on the row sorted in descending order (NaN first, equal values in index order, as ATen's
//   CUDA sort leaves them for these sizes: a stable radix sort):
//     p_j    = exp(sorted_j - sorted_0) / sum_j exp(sorted_j - sorted_0)         (softmax of the sorted row)
//     cum_j  = p_0 + ... + p_j
//     keep_j = j == 0 || cum_{j-1} <= top_p                                     (the shifted removal mask)
//     probs[idx_j] = keep_j ? exp(sorted_j - sorted_0) / sum_{kept} exp(...) : 0
//   equal to softmax(masked_fill(logits, removed, -inf)) up to the order of the fp32 sums (so the kept set
//   can differ from ATen's only when a cumulative sum is within rounding of top_p). The CUDA path sorts in the
//   kernel (a bitonic network in registers, warp shuffles and shared memory) for V <= 4096, and after at::sort
//   beyond that.
// draw_token(probs [N, V] fp32, noise [N, V] fp32 (Exp(1) draws, e.g. exponential_ with the generator))
//   -> [N, 1] int64 = argmax_i probs_i / noise_i (first index on ties, NaN counts as largest): what
//   at::multinomial(probs, 1) computes from the same noise. When `hist` ([N, L] int64) is defined, the
//   token is also written to hist[n, pos[0] + 1] (pos: int64 [1] on the device; a column outside hist is not
//   written by the CUDA path and refused by the CPU path).
// top_p_draw(logits [N, V] fp32, temperature, top_p, noise, hist, pos, probs_out) -> [N, 1] int64:
//   draw_token(top_p_probs(logits / temperature, top_p), noise, hist, pos), the filter and the draw in one
//   launch on CUDA (V <= 4096; otherwise the separate calls). The division is ATen's (one more launch, skipped
//   at temperature 1). `probs_out` ([N, V] fp32 contiguous, not the logits), when defined, receives the
//   filtered probabilities.
//
// CPU paths (the ATen composites) always; CUDA paths when built with CUDA kernels (top_p_probs: V <= 65536).
// The *_cpu functions are plain ATen and run on any device: Kronos eager mode samples through them on CUDA too.
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::kernels {

at::Tensor top_p_probs(const at::Tensor& logits, double top_p);
at::Tensor draw_token(const at::Tensor& probs, const at::Tensor& noise, const at::Tensor& hist = {}, const at::Tensor& pos = {});
at::Tensor top_p_draw(const at::Tensor& logits, double temperature, double top_p, const at::Tensor& noise, const at::Tensor& hist = {},
                      const at::Tensor& pos = {}, const at::Tensor& probs_out = {});

at::Tensor top_p_probs_cpu(const at::Tensor& logits, double top_p);
at::Tensor draw_token_cpu(const at::Tensor& probs, const at::Tensor& noise, const at::Tensor& hist = {}, const at::Tensor& pos = {});
at::Tensor top_p_draw_composite(const at::Tensor& logits, double temperature, double top_p, const at::Tensor& noise,
                                const at::Tensor& hist = {}, const at::Tensor& pos = {}, const at::Tensor& probs_out = {});
#ifdef CN_WITH_CUDA
at::Tensor top_p_probs_cuda(const at::Tensor& logits, double top_p);
at::Tensor draw_token_cuda(const at::Tensor& probs, const at::Tensor& noise, const at::Tensor& hist = {}, const at::Tensor& pos = {});
at::Tensor top_p_draw_cuda(const at::Tensor& logits, double temperature, double top_p, const at::Tensor& noise, const at::Tensor& hist = {},
                           const at::Tensor& pos = {}, const at::Tensor& probs_out = {});
#endif

}  // namespace cn::kernels
