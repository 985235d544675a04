// rows_gemm_mma — one of rows_gemm's candidate configurations for calls of few rows (its small tier), a kernel of
// cutenative's own instead of a cuBLASLt one: out [M, N] = x [M, K] W^T for M <= kMmaMaxRows on tensor cores
// (mma.sync m16n8k16, bf16 or f16 operands, fp32 accumulation). Each output element is one chain of mma steps over
// k = 0, 16, 32, ... in order, no split-K, so its arithmetic is a function of its own row and column alone; it is
// only a candidate: rows_gemm uses it for a weight when its outputs are bit-identical to the base configuration's on
// the probe (the condition every candidate meets) and it is faster there (kernels/rows_gemm.h).
// Measured on the H100 (docs/benchmarks.md, #19 seventh step): its bits equal cuBLASLt's sm90 kernels' for every
// Chronos-2 shape, bf16 and f16, with every epilogue.
// Layout: a block of two warps owns 16 output columns for every row (ceil(M / 16) tiles of 16 rows, rows past M read
// as zero). Its weight rows go to shared memory before the programmatic-dependent-launch wait (kernels/cuda_util.cuh),
// so they load while the previous kernel finishes; x's fragments are read from global memory (L2) straight into
// registers, 4-8 mma steps ahead.
// Epilogue, as cuBLASLt's: + bias [N] in fp32, ReLU, one rounding to T; accumulate (out += x W^T, kAddRounded): the
// product rounded to T, out's value added in fp32, rounded again (what the H100's cuBLASLt does, kernels/rows_gemm.h;
// adding to the unrounded product instead gave 29 % of values other bits, docs/benchmarks.md).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include <c10/core/ScalarType.h>

namespace cn::kernels::rows_gemm_detail {

constexpr int64_t kMmaMaxRows = 80;  // five tiles of 16 rows (rows_gemm's small tier: 1-68)

enum class MmaAdd {
    kNone,
    kAddRounded
};

// Whether the kernel takes these operands: bf16 or f16, 1 <= M <= kMmaMaxRows, N a multiple of 8, K a multiple of 16 up
// to 6144, x, w and out 16-byte aligned (rows_gemm's x and out are contiguous and aligned; w contiguous).
bool mma_takes(c10::ScalarType dt, int64_t M, int64_t N, int64_t K, const void* x, const void* w, const void* out);

// x [M, K] row-major, w [N, K] row-major, bias [N] or nullptr, out [M, N] row-major (read first when add != kNone);
// launched on `stream` with programmatic dependent launch. Throws cn::Error on a launch failure.
void mma_gemm(c10::ScalarType dt, const void* x, const void* w, const void* bias, void* out, int64_t M, int64_t N, int64_t K, bool relu,
              MmaAdd add, cudaStream_t stream);

}  // namespace cn::kernels::rows_gemm_detail
