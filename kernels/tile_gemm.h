// tile_gemm — y = relu?(x Wᵀ + b) over every row of x in one CUTLASS launch, with each output element computed by
// the same instruction chain whatever the call: the same MMA instruction over k in ascending order from a zero
// accumulator (bf16/f16: mma.sync m16n8k16, fp32 accumulators; f32: one exact fp32 FMA per k, no TF32), one
// threadblock K depth, no split-K, the same epilogue (bias, ReLU, one rounding to the dtype). The tile is chosen
// per call from the row count (small tiles for a few series, large ones for thousands), and that choice changes
// only the speed: a series' result is bit-identical whatever other series share its call
// (kernels/tile_gemm_launch.h has the argument; the GPU test checks it for every tile).
//   x    [..., K] any leading shape and strides (copied to an aligned row-major matrix when needed)
//   w    [N, K] contiguous; b [N] or undefined; one dtype (f32, bf16, f16) on one CUDA device
//   relu ReLU in the epilogue (after the bias, before the rounding: the rounding commutes with it)
//   out  x's shape with the last dim N, contiguous
// CUDA builds with CUTLASS (CN_WITH_CUTLASS) only; elsewhere tile_gemm_fits() is false and tile_gemm fails.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace cn::kernels {

// `tile`: -1 picks by row count (the default); 0..3 forces one (tests and benchmarks: same bits either way).
at::Tensor tile_gemm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}, bool relu = false, int tile = -1);

// Whether tile_gemm takes this weight: a CUDA tensor [N, K] of f32/bf16/f16, contiguous, and for bf16/f16 N and K
// multiples of 8 (16-byte accesses). Depends on the weight alone, never on the rows.
bool tile_gemm_fits(const at::Tensor& w);

// Whether series_linear's CUDA path uses tile_gemm for weights of this dtype (when they fit). Default: off until
// measured (docs/benchmarks.md); CN_TILE_GEMM=1 turns it on for every dtype, 0 off (read once). The setting is part
// of the arithmetic (it changes the last bits, never the batch invariance).
bool tile_gemm_enabled(at::ScalarType dtype);

// The tile a call of `rows` rows would use for this weight, as "MxN" (tests and benchmarks).
const char* tile_gemm_tile_name(at::ScalarType dtype, int tile);
int tile_gemm_pick(at::ScalarType dtype, int64_t rows, int64_t n);

}  // namespace cn::kernels
