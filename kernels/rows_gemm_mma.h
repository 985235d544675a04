// rows_gemm_mma — candidate configurations for rows_gemm's calls of few rows (its small tiers, 1-34 and 35-68 rows), kernels of cutenative's
// own instead of cuBLASLt's: out [M, N] = x [M, K] W^T for M <= kMmaMaxRows on tensor cores (mma.sync m16n8k16, bf16
// or f16 operands, fp32 accumulation). Each output element is one chain of mma steps over k = 0, 16, 32, ... in
// order, no split-K, so its arithmetic is a function of its own row and column alone; a variant is only a candidate:
// rows_gemm uses it for a weight when its outputs are bit-identical to the base configuration's on the probe (the
// condition every candidate meets) and it is faster there (kernels/rows_gemm.h).
// Measured on the H100 (docs/benchmarks.md, #19 seventh step): this chain's bits equal cuBLASLt's sm90 kernels' for
// every Chronos-2 shape, bf16 and f16, with every epilogue.
// Layout: a block owns `cols` output columns (8, 16 or 32: the variants) for every row, one warp per tile of 16 rows
// (ceil(M / 16) warps; rows past M read as zero). The block's weight rows (cols x K) go to shared memory before the
// programmatic-dependent-launch wait (kernels/cuda_util.cuh), so they load while the previous kernel finishes; each
// warp's rows of x follow in chunks of 256 k through a ring of three shared-memory stages (cp.async), and every
// fragment is read from shared memory with ldmatrix one mma step ahead, so a warp's time is its chain of K / 16
// dependent mma steps (cols / 8 chains side by side).
// Epilogue, as cuBLASLt's: + bias [N] in fp32, ReLU, one rounding to T; accumulate (out += x W^T, kAddRounded): the
// product rounded to T, out's value added in fp32, rounded again (what the H100's cuBLASLt does, kernels/rows_gemm.h;
// adding to the unrounded product instead gave 29 % of values other bits, docs/benchmarks.md).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include <c10/core/ScalarType.h>

namespace cn::kernels::rows_gemm_detail {

constexpr int64_t kMmaMaxRows = 80;  // five tiles of 16 rows (rows_gemm's small tiers: 1-68 rows)
// The variants: output columns per block.
constexpr int kMmaColVariants[] = {8, 16, 32};

enum class MmaAdd {
    kNone,
    kAddRounded
};

// Whether the variant of `cols` columns per block takes these operands: bf16 or f16, 1 <= M <= kMmaMaxRows, N a
// multiple of 8, K a multiple of 16 whose weight rows and x stages fit in the device's shared memory per block (on
// the H100 at 80 rows: K <= 1536 for 32 columns, 3072 for 16, 6144 for 8), x, w and out 16-byte aligned (rows_gemm's x and out are contiguous and aligned; w contiguous).
bool mma_takes(c10::ScalarType dt, int64_t M, int64_t N, int64_t K, int cols, const void* x, const void* w, const void* out);

// x [M, K] row-major, w [N, K] row-major, bias [N] or nullptr, out [M, N] row-major (read first when add != kNone);
// launched on `stream` with programmatic dependent launch. Throws cn::Error on operands mma_takes refuses or a
// launch failure.
void mma_gemm(c10::ScalarType dt, const void* x, const void* w, const void* bias, void* out, int64_t M, int64_t N, int64_t K, bool relu,
              MmaAdd add, int cols, cudaStream_t stream);

// A measuring tool, not a candidate (#19, `cn_bench_gemm ksplit`; bf16 only, sm_90 and later: clusters): the same kernel with K split over a
// cluster of `split` (2 or 4) blocks per column group, each running the chain over its k range, rank 0 adding the others'
// partial tiles in rank order (((p0 + p1) + p2) + p3) through distributed shared memory before the epilogue (none,
// or kAddRounded). Its outputs are not cuBLASLt's bits (the chain is cut), so rows_gemm never uses it: it measures
// what a K split fixed for every row count would buy small calls (docs/benchmarks.md, eleventh step).
bool mma_ksplit_takes(c10::ScalarType dt, int64_t M, int64_t N, int64_t K, int cols, int split, const void* x, const void* w,
                      const void* out);
void mma_gemm_ksplit(c10::ScalarType dt, const void* x, const void* w, void* out, int64_t M, int64_t N, int64_t K, MmaAdd add, int cols,
                     int split, cudaStream_t stream);

}  // namespace cn::kernels::rows_gemm_detail
