// rope_attention — Chronos-2's time self-attention core: RoPE on the q and k parts of a fused QKV projection,
// softmax(q kᵀ + bias) v per (series, head) with scale 1, and the heads merged back into rows. Two paths:
// the composite (kernels::rope_, at::scaled_dot_product_attention, merge: the CPU path, f32, and every shape the
// kernel does not take) and one CUDA kernel on tensor cores (bf16 and f16, the default there; CN_ROPE_ATTENTION=0
// turns it off).
//   qkv      [B, S, 3 H dk] contiguous: q | k | v, each H heads of dk; dtype T (F32, BF16, F16). Scratch: the
//            composite path rotates its q and k parts in place.
//   bias     [B, S] dtype T, contiguous: the additive key mask (0, or T's lowest value for a masked key)
//   inv_freq [dk/2] fp32 (RoPE, positions 0..S-1, kernels/rope.h's roundings)
//   returns  [B, S, H dk] dtype T
// Kernel semantics: q and k rotated exactly as kernels::rope_ does (rounded to T), then per query: scores q·k_j
// (mma, fp32 accumulation) + bias_j; softmax online over blocks of 16 keys (flash-attention style: p_j =
// exp(score_j - running max) in fp32 (__expf), earlier terms rescaled when the maximum grows); the sum of p_j v_j
// on tensor cores with p_j split in two T values (p ≈ round_T(p) + round_T(p - round_T(p)): ~16 bits kept, where
// SDPA's kernels round p to T once); times the reciprocal of the sum of p_j in fp32, one rounding to T. One block
// per (series, head), q, k and v of the series and head in shared memory; nothing is reduced across series, so a
// series' output never depends on the rest of the batch, and every sum's order depends only on (S, dk).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace cn::kernels {

// `table`: kernels::rope_table(inv_freq, S, dtype) made once per pass and shared by its layers (optional: the
// kernel makes it when undefined; the composite's CUDA RoPE reads it instead of evaluating cos and sin).
at::Tensor rope_attention(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t heads,
                          const at::Tensor& table = {});

// Whether rope_attention may use its CUDA kernel: yes unless CN_ROPE_ATTENTION=0 (read once; to measure the
// composite against it). docs/benchmarks.md (#19) has the measurements.
bool rope_attention_cuda_enabled();

// Whether the CUDA kernel takes this input: a CUDA tensor of BF16 or F16, dk of 32, 64 or 128, S tokens whose
// q, k and v fit the block's shared memory (S up to 200 at dk = 64; Chronos-2's context of 2048 is 130 tokens at H = 16), a 16-byte aligned base.
bool rope_attention_cuda_takes(const at::Tensor& qkv, int64_t heads);

namespace rope_attention_detail {
constexpr int kWarps = 4;                   // per block at most: a warp per 16 queries (min(kWarps, ceil(S / 16)) warps)
constexpr int64_t kMaxShared = 227 * 1024;  // sm_90's most per block; less where the device allows less
// Shared memory of one block (Sp = S rounded up to 16): q, k and v [Sp][dk + 8] in T (2 bytes), the RoPE table
// [S][dk/2] float2, the key mask [Sp] in fp32.
constexpr int64_t shared_bytes(int64_t S, int64_t dk) {
    const int64_t Sp = (S + 15) / 16 * 16;
    return 2 * 3 * Sp * (dk + 8) + 8 * S * (dk / 2) + 4 * Sp;
}
}  // namespace rope_attention_detail

at::Tensor rope_attention_composite(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t heads,
                                    const at::Tensor& table = {});
#ifdef CN_WITH_CUDA
// The kernel alone (fails with kInternal on an input rope_attention_cuda_takes refuses).
at::Tensor rope_attention_cuda(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t heads,
                               const at::Tensor& table = {});
#endif

}  // namespace cn::kernels
