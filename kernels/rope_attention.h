// rope_attention — Chronos-2's time self-attention core: RoPE on the q and k parts of a fused QKV projection,
// softmax(q kᵀ + bias) v per (series, head) with scale 1, and the heads merged back into rows. Two paths:
// the composite (kernels::rope_, at::scaled_dot_product_attention, merge: the default, and the CPU path) and one
// CUDA kernel (CN_ROPE_ATTENTION=1, below).
//   qkv      [B, S, 3 H dk] contiguous: q | k | v, each H heads of dk; dtype T (F32, BF16, F16). Scratch: the
//            composite path rotates its q and k parts in place.
//   bias     [B, S] dtype T, contiguous: the additive key mask (0, or T's lowest value for a masked key)
//   inv_freq [dk/2] fp32 (RoPE, positions 0..S-1, kernels/rope.h's roundings)
//   returns  [B, S, H dk] dtype T
// Kernel semantics: q and k rotated exactly as kernels::rope_ does (rounded to T), then per query, in fp32:
// scores q·k_j + bias_j, softmax, the weighted sum of v, one rounding to T; equal to the composite up to fp32
// rounding of the softmax. One block per (series, head, 16 queries), K (rotated) and V of the series and head in
// shared memory; a warp per query: a lane per key for the scores (a fixed-order fp32 sum over dk in four
// interleaved partial sums, d mod 4), a lane per dimension for the output (two interleaved partial sums over the
// keys, even and odd). dk = 64 (every Chronos-2 size) has its own instantiation (16-byte loads, the query in
// registers) computing the same sums in the same order as the generic one. Nothing is reduced across series, so
// a series' output never depends on the rest of the batch. Shapes the kernel does not take (too long for its
// shared memory: rope_attention_fits) run the composite.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace cn::kernels {

// `table`: kernels::rope_table(inv_freq, S, dtype) made once per pass and shared by its layers (optional: the
// kernel makes it when undefined; the composite's CUDA RoPE reads it instead of evaluating cos and sin).
at::Tensor rope_attention(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t heads,
                          const at::Tensor& table = {});

// Whether rope_attention uses its CUDA path on CUDA tensors: only with CN_ROPE_ATTENTION=1 (read once). Measured on
// an H100 (docs/benchmarks.md, #19): faster than the composite for up to ~16 series per call (fused bf16 at B=1:
// 0.71 against 0.76 ms), slower from ~64 up (B=1024: 31.8 against 27.5 ms; a warp per query leaves most lanes idle
// at 34 keys), hence off by default. It changes the last bits of fused mode, never its batch invariance.
bool rope_attention_cuda_enabled();

// Whether the CUDA path takes S tokens of head dim dk (its shared memory holds K and V of one series and head).
bool rope_attention_fits(int64_t S, int64_t dk);

namespace rope_attention_detail {
constexpr int kWarps = 8;             // per block
constexpr int kQueriesPerBlock = 16;  // kWarps warps, one query at a time each
constexpr int64_t kMaxShared = 160 * 1024;
// fp32 shared memory of one block: K rotated [S][dk + 4] (padded rows: a lane per key reads without bank conflicts,
// 16-byte aligned), V [S][dk], its queries rotated [16][dk], one score row [S] per warp, the key mask [S].
constexpr int64_t shared_bytes(int64_t S, int64_t dk) { return 4 * (S * (dk + 4) + S * dk + kQueriesPerBlock * dk + kWarps * S + S); }
}  // namespace rope_attention_detail

at::Tensor rope_attention_composite(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t heads,
                                    const at::Tensor& table = {});
#ifdef CN_WITH_CUDA
// generic: the any-dk instantiation even for dk = 64 (tests: both give the same bits).
at::Tensor rope_attention_cuda(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t heads,
                               const at::Tensor& table = {}, bool generic = false);
#endif

}  // namespace cn::kernels
