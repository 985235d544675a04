// series_linear — a linear layer y = x W^T (+ b) applied to each series of a batch by GEMM calls of its own,
// so that a series' result depends neither on the other series of the call nor on the thread count (the
// server merges requests on this, and backtests must reproduce on any core count).
//   x    [n, R, K] (dim 0) or [R, n, K] (dim 1): n series of R rows each, any strides
//   w    [N, K] contiguous, b [N] or undefined; same dtype and device as x
//   out  x's shape with the last dim N, contiguous
// CPU: the N output columns are cut into blocks of kSeriesLinearBlock columns (the last one narrower),
//   a cut fixed by N alone; every (series, block) pair is one single-threaded MKL GEMM (at::addmm / at::mm
//   into the output), and the pairs run in parallel on ATen's intra-op threads. A single-threaded GEMM's
//   rounding depends only on its operands (MKL's conditional reproducibility makes it independent of their
//   alignment: core/runtime/cpu_numerics.h), so neither the batch nor the thread count changes a bit.
//   (A multi-threaded MKL GEMM splits its work by the thread count, and on AMD processors MKL's "strict"
//   reproducibility mode does not prevent that: 1 vs 4 threads differed in the last bit.)
// CUDA: one rows_gemm launch over all rows (pinned cuBLASLt configurations: kernels/rows_gemm.h); with
//   CN_ROWS_GEMM=0, one cuBLAS GEMM per series into its slice of the output (cuBLAS picks its kernel by shape
//   alone). Either way batch-invariant.
// relu: max(0, ·) of the result (rows_gemm: in the GEMM's epilogue; elsewhere in place after the GEMMs).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace cn::kernels {

// 64: on a 16-core Xeon a batch of one runs the model's linear layers 1.2x slower than one threaded GEMM per series
// (128: 1.7x, 256: 2.0x), batches of 8 and 32 0.94x and 0.53x; on 2 cores every width costs the same
// (docs/benchmarks.md, cn_bench_cpu).
constexpr int64_t kSeriesLinearBlock = 64;

at::Tensor series_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}, int64_t dim = 0, bool relu = false);

// out += series_linear(x, w) for x [n, R, K] (series along dim 0) and out [n, R, N] contiguous (not overlapping x): the
// residual add of a pre-norm block. CUDA with rows_gemm: in the GEMM's epilogue (kernels/rows_gemm.h,
// rows_gemm_accumulate: the same bits as the separate add in f32); otherwise series_linear then an in-place add.
void series_linear_accumulate(const at::Tensor& x, const at::Tensor& w, const at::Tensor& out);

// The same with another block width: for benchmarks only (the width is part of the rounding: models use the
// constant above, so a series' bits never change with a setting).
at::Tensor series_linear_blocked(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t dim, int64_t block,
                                 bool relu = false);

// Whether the CPU path can pin MKL to one thread per GEMM (false for a LibTorch without MKL: then the GEMMs
// run with the BLAS's own threading and results may depend on the thread count).
bool series_linear_thread_invariant();

}  // namespace cn::kernels
