// CUDA path of skinny_linear: block of 8 warps, each warp two output columns for all M rows.
#include "kernels/skinny_gemm.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {
namespace {

using cuda::from_f;
using cuda::to_f;

constexpr int kWarps = 8, kCols = 2;

// Eight consecutive weights from one 16-byte load, as fp32.
template <class T> struct Vec8;
template <> struct Vec8<float> {
    static __device__ __forceinline__ void load(const float* p, float (&v)[8]) {
        const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
};
template <class H> struct Vec8Half {
    static __device__ __forceinline__ void load(const H* p, float (&v)[8]) {
        const uint4 a = *reinterpret_cast<const uint4*>(p);
        const H* h = reinterpret_cast<const H*>(&a);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = to_f(h[i]);
    }
};
template <> struct Vec8<__nv_bfloat16> : Vec8Half<__nv_bfloat16> {};
template <> struct Vec8<__half> : Vec8Half<__half> {};

template <class T, int MR>
__global__ void __launch_bounds__(kWarps * 32) skinny_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                                             T* __restrict__ out, int M, int K, int N) {
    // No shared memory and no barrier: every load of the step is independent (x's few rows are read by every
    // warp and stay in L1), so one launch costs about one memory round trip.
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n0 = (blockIdx.x * kWarps + warp) * kCols;
    if (n0 >= N) return;
    float acc[kCols][MR];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
#pragma unroll
        for (int m = 0; m < MR; ++m) acc[c][m] = 0.f;
    }
#pragma unroll 2
    for (int k = lane * 8; k < K; k += 32 * 8) {
        float wv[kCols][8], xv[MR][8];
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
            if (n0 + c < N) {
                Vec8<T>::load(w + static_cast<int64_t>(n0 + c) * K + k, wv[c]);
            } else {
#pragma unroll
                for (int i = 0; i < 8; ++i) wv[c][i] = 0.f;
            }
        }
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            if (m < M) {
                Vec8<T>::load(x + static_cast<int64_t>(m) * K + k, xv[m]);
            } else {
#pragma unroll
                for (int i = 0; i < 8; ++i) xv[m][i] = 0.f;
            }
        }
#pragma unroll
        for (int m = 0; m < MR; ++m) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
#pragma unroll
                for (int c = 0; c < kCols; ++c) acc[c][m] += wv[c][i] * xv[m][i];
            }
        }
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            float v = acc[c][m];
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0 && m < M && n0 + c < N) out[static_cast<int64_t>(m) * N + n0 + c] = from_f<T>(v + (b ? to_f(b[n0 + c]) : 0.f));
        }
    }
}

}  // namespace

at::Tensor skinny_linear_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    if (!skinny_linear_fits(x, w) || (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0) || !b.is_contiguous() ||
                                                      b.scalar_type() != w.scalar_type() || b.device() != w.device()))) {
        fail(Status::kInternal, "skinny_linear: x [M <= 16, K % 8 == 0], w [N, K] 16-byte aligned, b [N]: contiguous, one dtype and device");
    }
    c10::cuda::CUDAGuard guard(x.device());
    const int M = static_cast<int>(x.size(0)), K = static_cast<int>(x.size(1)), N = static_cast<int>(w.size(0));
    at::Tensor out = at::empty({M, N}, x.options());
    if (N == 0) return out;
    const int per_block = kWarps * kCols;
    const unsigned blocks = static_cast<unsigned>((N + per_block - 1) / per_block);
    auto stream = at::cuda::getCurrentCUDAStream();
    CN_DISPATCH_FLOAT_TYPES(x.scalar_type(), "skinny_linear", [&] {
        const auto* xp = reinterpret_cast<const scalar_t*>(x.const_data_ptr());
        const auto* wp = reinterpret_cast<const scalar_t*>(w.const_data_ptr());
        const auto* bp = b.defined() ? reinterpret_cast<const scalar_t*>(b.const_data_ptr()) : nullptr;
        auto* op = reinterpret_cast<scalar_t*>(out.data_ptr());
        const int threads = kWarps * 32;
        if (M <= 1) skinny_kernel<scalar_t, 1><<<blocks, threads, 0, stream>>>(xp, wp, bp, op, M, K, N);
        else if (M <= 2) skinny_kernel<scalar_t, 2><<<blocks, threads, 0, stream>>>(xp, wp, bp, op, M, K, N);
        else if (M <= 4) skinny_kernel<scalar_t, 4><<<blocks, threads, 0, stream>>>(xp, wp, bp, op, M, K, N);
        else if (M <= 8) skinny_kernel<scalar_t, 8><<<blocks, threads, 0, stream>>>(xp, wp, bp, op, M, K, N);
        else skinny_kernel<scalar_t, 16><<<blocks, threads, 0, stream>>>(xp, wp, bp, op, M, K, N);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out;
}

}  // namespace cn::kernels
