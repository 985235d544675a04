// tile_gemm's launch layer: plain pointers and a stream in, one CUTLASS GEMM launch out; no LibTorch (the
// CUTLASS translation units stay free of ATen's headers). Used by kernels/tile_gemm.cpp only.
//
// Every tile of one dtype computes an output element with the same instruction sequence: the same MMA
// instruction (bf16/f16: mma.sync m16n8k16 with fp32 accumulators; f32: one fp32 FMA per k on CUDA cores),
// over k in ascending order, one accumulator per element from zero, the same threadblock K depth (so the same
// K residue handling), no split-K and no sliced-K; then the same epilogue (acc, plus the bias, ReLU, one
// rounding to the output dtype). Which tile a call uses is therefore a speed choice only: a row's result does
// not depend on the row count that picked the tile, nor on where the row sits in the matrix.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace cn::kernels::tile_gemm_impl {

enum class Dtype {
    kF32 = 0,
    kBF16 = 1,
    kF16 = 2
};

// out [M, N] (row stride N) = relu?(x [M, K] (row stride ldx) · w [N, K]ᵀ (row stride K) + bias [N]?).
struct Args {
    int64_t M = 0, N = 0, K = 0, ldx = 0;
    const void* x = nullptr;
    const void* w = nullptr;
    const void* bias = nullptr;  // null: no bias
    void* out = nullptr;
    bool relu = false;
    cudaStream_t stream = nullptr;
};

struct Tile {
    int m, n;  // threadblock tile (rows of x, columns of out)
};

constexpr int kTiles = 4;  // per dtype, smallest first
// The tiles of a dtype, smallest first (tile_gemm.cpp picks one per call from M and N).
const Tile* tiles(Dtype dt);
// The elements a 16-byte access holds: K, N, ldx and the pointers must be multiples of it (f32: 1).
int alignment(Dtype dt);

// Launches tile `tile` (0..kTiles-1). Returns 0, or CUTLASS's status code (can_implement or launch failure).
int launch(Dtype dt, int tile, const Args& a);
int launch_bf16(int tile, const Args& a);
int launch_f16(int tile, const Args& a);
int launch_f32(int tile, const Args& a);

}  // namespace cn::kernels::tile_gemm_impl
