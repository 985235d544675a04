// tile_gemm's CUTLASS kernels, one template for every tile of a dtype (kernels/tile_gemm_launch.h says why a
// tile never changes the arithmetic). Included by tile_gemm_{bf16,f16,f32}.cu, one dtype per translation unit
// (CUTLASS instantiations are the slow part of the build; three files build in parallel).
//
// CUTLASS 2.x device-wide GEMM (cutlass/gemm/device/gemm.h), Ampere-style kernels (cp.async multistage
// mainloop), which run on sm_80 and later:
//   A = x    [M, K] row-major (lda = ldx)
//   B = wᵀ   [K, N] column-major (the weight [N, K] as stored, ldb = K)
//   C = bias broadcast as a row-major [M, N] matrix with ldc = 0 (beta = 1), or unread (beta = 0)
//   D = out  [M, N] row-major (ldd = N)
// The warp tile's K equals the threadblock's (no sliced-K), split-K is 1, and every tile of a dtype has the same
// threadblock K depth, so each output element is the same chain of MMA steps over k = 0, 16, 32, ... (f32: one FMA
// per k) whatever the tile.
#pragma once

#include <type_traits>

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/epilogue/thread/linear_combination_relu.h>
#include <cutlass/gemm/device/gemm.h>

#include "kernels/tile_gemm_launch.h"

namespace cn::kernels::tile_gemm_impl {

template <class Element, class OpClass, int TbM, int TbN, int TbK, int WM, int WN, int IM, int IN, int IK, int Stages, bool Relu>
int run_gemm(const Args& a) {
    constexpr int kAlign = std::is_same<OpClass, cutlass::arch::OpClassTensorOp>::value ? 128 / cutlass::sizeof_bits<Element>::value : 1;
    using Epilogue = typename std::conditional<Relu, cutlass::epilogue::thread::LinearCombinationRelu<Element, kAlign, float, float>,
                                               cutlass::epilogue::thread::LinearCombination<Element, kAlign, float, float>>::type;
    using Gemm =
        cutlass::gemm::device::Gemm<Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor, Element,
                                    cutlass::layout::RowMajor, float, OpClass, cutlass::arch::Sm80, cutlass::gemm::GemmShape<TbM, TbN, TbK>,
                                    cutlass::gemm::GemmShape<WM, WN, TbK>, cutlass::gemm::GemmShape<IM, IN, IK>, Epilogue,
                                    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, Stages, kAlign, kAlign,
                                    /*SplitKSerial=*/false, cutlass::arch::OpMultiplyAdd>;
    const cutlass::gemm::GemmCoord size(static_cast<int>(a.M), static_cast<int>(a.N), static_cast<int>(a.K));
    const Element* x = static_cast<const Element*>(a.x);
    const Element* w = static_cast<const Element*>(a.w);
    const Element* bias = static_cast<const Element*>(a.bias);
    Element* out = static_cast<Element*>(a.out);
    // With a bias: D = 1 * acc + 1 * bias (the epilogue computes fma(alpha, acc, beta * C): exactly acc + bias); without
    // one, beta = 0 and C is never read.
    typename Gemm::Arguments args(size, {x, a.ldx}, {w, a.K}, {bias ? bias : out, bias ? 0 : a.N}, {out, a.N}, {1.0f, bias ? 1.0f : 0.0f},
                                  /*split_k_slices=*/1);
    Gemm op;
    cutlass::Status s = op.can_implement(args);
    if (s != cutlass::Status::kSuccess) return static_cast<int>(s) + 1000;
    s = op.initialize(args, nullptr, a.stream);
    if (s != cutlass::Status::kSuccess) return static_cast<int>(s) + 2000;
    s = op.run(a.stream);
    if (s != cutlass::Status::kSuccess) return static_cast<int>(s) + 3000;
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : static_cast<int>(e) + 4000;
}

// One tile, both epilogues.
template <class Element, class OpClass, int TbM, int TbN, int TbK, int WM, int WN, int IM, int IN, int IK, int Stages>
int run_tile(const Args& a) {
    return a.relu ? run_gemm<Element, OpClass, TbM, TbN, TbK, WM, WN, IM, IN, IK, Stages, true>(a)
                  : run_gemm<Element, OpClass, TbM, TbN, TbK, WM, WN, IM, IN, IK, Stages, false>(a);
}

// The tensor-core tiles (bf16, f16): mma.sync m16n8k16, threadblock K 64. Tile shapes as in tiles() (tile_gemm.cpp).
template <class Element>
int launch_tensor_op(int tile, const Args& a) {
    using TC = cutlass::arch::OpClassTensorOp;
    switch (tile) {
        case 0: return run_tile<Element, TC, 32, 32, 64, 32, 32, 16, 8, 16, 6>(a);
        case 1: return run_tile<Element, TC, 64, 64, 64, 32, 32, 16, 8, 16, 5>(a);
        case 2: return run_tile<Element, TC, 128, 128, 64, 64, 64, 16, 8, 16, 4>(a);
        case 3: return run_tile<Element, TC, 128, 256, 64, 64, 64, 16, 8, 16, 3>(a);
        default: return -1;
    }
}

// The f32 tiles: exact fp32 FMAs on CUDA cores (no TF32), threadblock K 8.
inline int launch_simt_f32(int tile, const Args& a) {
    using S = cutlass::arch::OpClassSimt;
    switch (tile) {
        case 0: return run_tile<float, S, 32, 32, 8, 32, 32, 1, 1, 1, 4>(a);
        case 1: return run_tile<float, S, 64, 64, 8, 32, 32, 1, 1, 1, 4>(a);
        case 2: return run_tile<float, S, 128, 128, 8, 32, 64, 1, 1, 1, 3>(a);
        case 3: return run_tile<float, S, 256, 128, 8, 64, 64, 1, 1, 1, 3>(a);
        default: return -1;
    }
}

}  // namespace cn::kernels::tile_gemm_impl
