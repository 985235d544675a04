// CPU results that depend on neither the batch nor the thread count.
//
// ATen runs fp32 CPU GEMMs in MKL. By default MKL picks its code path by processor and may round a row
// differently depending on the operands' memory alignment (seen on AMD EPYC: a series forecast alone differed
// in the last bit from the same series in a call of four, so the server's merged answers differed from
// unmerged ones), and a multi-threaded GEMM splits its work by the thread count. Two measures:
//   - MKL's conditional numerical reproducibility (CNR) in mode AUTO keeps the processor's fastest path but
//     makes it independent of alignment. cutenative sets it for the process the first time the library is
//     loaded or a model is created, unless MKL_CBWR is set in the environment (that choice then stands, e.g.
//     MKL_CBWR=COMPATIBLE for the same GEMM bits across processor vendors, about 2.2x slower GEMMs). MKL
//     accepts it only before its first computation: a host process that ran an MKL GEMM before loading
//     cutenative keeps MKL's default, and cpu_numerics() says so. Cost on a 2-core AMD EPYC: none measurable
//     (docs/benchmarks.md).
//   - The batch-invariant models' linear layers run as single-threaded GEMMs over fixed column blocks
//     (kernels/series_linear.h), so the thread count only decides which thread runs a block. (MKL's own
//     "strict" mode, meant for this, did not hold on AMD: 1 vs 4 threads differed.)
//
// What remains processor-dependent: ATen's own vectorised kernels and MKL's path differ between processor
// models at rounding level (parity tests hold everywhere at their tolerances). Where a statistic decides a
// branch (a series' scale is 0 or not), the models compute it in the reference's summation order in their own
// code (kernels/cascade_sum.h, core/common/numpy_sum.h), so that branch never depends on the processor.
// Kronos and the embedding model run the reference's ops (multi-threaded GEMMs): their CPU results are
// alignment-independent under CNR but may change with the thread count.
#pragma once

#include <cstdint>
#include <string>

namespace cn::runtime {

// The flags hold for fp32 (bf16/fp16 CPU GEMMs run in oneDNN or ATen, outside these measures) and for series
// padded to the same length (a call left-pads every series to its longest one).
struct CpuNumerics {
    bool batch_invariant = false;   // Chronos-2: a series' result depends neither on the rest of its call nor on alignment
    bool thread_invariant = false;  // ... nor on the number of CPU threads
    std::string description;        // processor, ATen's CPU kernels, BLAS and its reproducibility mode
};

// Applies the setting above once per process (thread-safe) and returns what holds.
const CpuNumerics& cpu_numerics();

}  // namespace cn::runtime
