// rows_gemm — y = x W^T (+ b) over every row of x at once, computed so that each output row depends only on its
// own input row: one cuBLASLt kernel configuration (algorithm, tile, stages, split-K 1) is chosen
// per (dtype, N, K, bias, ReLU) once, at a fixed reference row count, and then used for every row count (its workspace,
// if any, sized for the largest row count checked; never split-K). A row's dot
// products therefore run the same instructions in the same K order whether the call has 34 rows or 34,000, so
// a series' result is bit-identical whatever other series share its call (the batch invariance Chronos-2's
// server merging relies on), with one launch per linear layer instead of one per series.
// Row-count tiers may run other configurations (bf16/f16: calls of 1-34, 35-68, 69-272, 273-1088, 1089-4095 and 4096+
// rows, the candidates up to eight of cuBLASLt's answers for 34, 68, 136, 544, 2176 and 8704 rows; f32: 1-68, 69-1088, 1089-4095,
// 4096-16383 and 16384+, its answer for 34, 544, 2176, 8192 and 32768 rows and the base algorithm with each of its
// other tiles), but only ones that gave bit-identical outputs to the base configuration on a probe at choice time
// (tile and raster differ, the K order of a row's dot products does not) and ran at least 5 % faster than the base
// when timed at the tier's own row count (min(chosen-for, probe): 34, 68, 136, 544, 2176, 8704, ...; short GEMMs timed inside
// a CUDA graph, as fused mode runs them), the fastest such one winning. A near-tie with the base stays on the base;
// among faster candidates the timing of this process decides, so the configuration (never a bit) may differ between
// processes (docs/benchmarks.md, #19 eleventh step: two H100 processes chose different tiles at 544 rows).
// Choosing took up to ~0.1 s per weight shape with four bf16 tiers (six now; not measured again), when the shape is
// first met outside CUDA graph capture (once per process); any winner gives the base's bits. CN_ROWS_GEMM_SMALL=0 / CN_ROWS_GEMM_MID=0 / CN_ROWS_GEMM_LARGE=0 turn
// the tiers off; CN_ROWS_GEMM_SEARCH=1 makes the bf16/f16 tiers try every tile and custom option of cuBLASLt's answer
// (a measuring tool: ~20 s per shape). rows_gemm_config() says which a weight uses.
//   x  [..., K] (any leading shape, any strides; copied to a 16-byte-aligned contiguous matrix when needed)
//   w  [N, K] contiguous; b [N] or undefined; same dtype (f32: exact fp32 products and sums, no TF32; bf16/f16:
//      fp32 accumulation, rounded once to the output dtype, the bias added in the epilogue before that rounding)
//   out  x's shape with the last dim N, contiguous
// CUDA only (CN_WITH_CUDA builds); kInternal on CPU tensors. The chosen configurations are cached per process
// (per device); rows_gemm_config() describes the one a shape uses.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace cn::kernels {

// relu: max(0, ·) in the epilogue, after the bias and before the rounding (cuBLASLt's RELU / RELU_BIAS epilogue; the
// configuration is chosen for that epilogue, so it is part of the key).
at::Tensor rows_gemm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}, bool relu = false);

// out += x W^T in the GEMM's epilogue (cuBLASLt's beta = 1, C = D = out): the residual add of a pre-norm block without
// a pass of its own. f32: bit-identical to out + rows_gemm(x, w) (tested); bf16/f16: cuBLASLt's epilogue arithmetic (on
// the H100 it rounds the product to the dtype before adding C, as the separate add does; the GPU test prints how many
// elements differ from it). No bias, no ReLU. out: x's shape with the last dim N, contiguous, 16-byte aligned, not
// overlapping x. Its configurations are chosen and verified like rows_gemm's (separately: the C read is part of the
// epilogue).
void rows_gemm_accumulate(const at::Tensor& x, const at::Tensor& w, const at::Tensor& out);

// A one-line description of the configuration rows_gemm (accumulate: rows_gemm_accumulate) uses for this weight (and
// bias presence): algorithm id, tile, stages, split-K, and the tiers'. For tests and benchmarks.
std::string rows_gemm_config(const at::Tensor& w, bool bias, bool relu = false, bool accumulate = false);

// Whether series_linear's CUDA path uses rows_gemm (one launch over all rows) instead of one GEMM per series, for
// weights of this dtype. Default: every dtype (measured on an H100, docs/benchmarks.md: bf16 is as fast at one
// series and 4-9x faster from 16 series up; f32 3x faster at 16 series and ~5x from 64 up, but 2x slower at one
// series, where per-series cuBLAS splits K, than with one GEMM per series). CN_ROWS_GEMM=0 turns it off for every dtype (read once; "1" is
// the default). Either way a series' result does not depend on its batch; the setting is part of the arithmetic
// (it changes the last bits).
bool rows_gemm_enabled(at::ScalarType dtype);

}  // namespace cn::kernels
