// Rotary position embedding in place (rotate_half convention; Chronos-2 and Kronos).
//
// Semantics for x [B, S, H, dk] of dtype T (F32, BF16, F16), inv_freq [dk/2] fp32, i < dk/2, h = dk/2:
//   f = inv_freq[i] * s                  (fp32, position s; see pos0 / pos_offset below)
//   c = round_T(cos f), n = round_T(sin f)
//   x'[i]   = round_T(round_T(x[i] * c)   - round_T(x[i+h] * n))
//   x'[i+h] = round_T(round_T(x[i+h] * c) + round_T(x[i] * n))
// which is the reference's `x * cos + rotate_half(x) * sin` with its tables in the model dtype, rounded
// after every op as ATen does. The last dim must be contiguous; the others may have any strides (q and k
// are views into a fused QKV projection). One element pair per thread; no reduction.
//
// CPU path always; CUDA path when built with CUDA kernels.
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::kernels {

// Positions are s + pos0 (+ pos_offset[0] when given: an int64 [1] tensor on x's device, read on the device
// by the CUDA path, so a captured graph can advance it).
// `table` (CUDA, positions from 0 only: pos0 = 0 and no pos_offset): rope_table's pairs for at least S positions,
// made once and shared by several calls; the kernel then reads them instead of evaluating cos and sin per element
// (the same values, the same bits).
void rope_(const at::Tensor& x, const at::Tensor& inv_freq, int64_t pos0 = 0, const at::Tensor& pos_offset = {},
           const at::Tensor& table = {});
void rope_cpu_(const at::Tensor& x, const at::Tensor& inv_freq, int64_t pos0 = 0, const at::Tensor& pos_offset = {});

// The rounded (cos, sin) pairs of positions 0..S-1: [S, dk/2, 2] fp32 on inv_freq's device, (round_T(cos f),
// round_T(sin f)) with f = inv_freq[i] * s in fp32, as the CUDA rope_ computes them (kernels/rope.cuh). Undefined
// for a CPU inv_freq (the CPU path computes its own).
at::Tensor rope_table(const at::Tensor& inv_freq, int64_t S, at::ScalarType dtype);
#ifdef CN_WITH_CUDA
at::Tensor rope_table_cuda(const at::Tensor& inv_freq, int64_t S, at::ScalarType dtype);
void rope_cuda_(const at::Tensor& x, const at::Tensor& inv_freq, int64_t pos0 = 0, const at::Tensor& pos_offset = {},
                const at::Tensor& table = {});
#endif

}  // namespace cn::kernels
