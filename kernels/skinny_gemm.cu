// CUDA path of skinny_linear: block of 8 warps, each warp two output columns for all M rows; the norm / SwiGLU
// prologue is applied to x as it is loaded, the residual add to each output.
#include "kernels/skinny_gemm.h"

#include <type_traits>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {
namespace {

using cuda::from_f;
using cuda::round_to;
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

enum Prologue { kPlain = 0, kNorm = 1, kSwiglu = 2 };

// x's eight elements at (m, k) as the GEMM sees them: as stored (kPlain), after the RMS norm (kNorm: g are the
// norm weights at k, inv the row's rsqrt) or after the SwiGLU gate (kSwiglu: the row holds [a | b], stride 2K).
template <class T, int PRO>
__device__ __forceinline__ void load_x(const T* __restrict__ x, int64_t m, int k, int K, const float (&g)[8], float inv,
                                       float (&v)[8]) {
    if constexpr (PRO == kSwiglu) {
        float a[8], b[8];
        Vec8<T>::load(x + m * 2 * K + k, a);
        Vec8<T>::load(x + m * 2 * K + K + k, b);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = round_to<T>(round_to<T>(a[i] / (1.0f + expf(-a[i]))) * b[i]);
    } else {
        Vec8<T>::load(x + m * K + k, v);
        if constexpr (PRO == kNorm) {
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = round_to<T>(g[i] * round_to<T>(v[i] * inv));
        }
    }
}

template <class T, int MR, int PRO>
__global__ void __launch_bounds__(kWarps * 32)
    skinny_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, const T* __restrict__ norm_w,
                  float eps, const T* __restrict__ residual, T* __restrict__ out, int M, int K, int N) {
    // No shared memory and no barrier beyond the norm's row statistics: every load of the step is independent
    // (x's few rows are read by every warp and stay in L1), so one launch costs about one memory round trip.
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __shared__ float inv_rms[MR];
    if constexpr (PRO == kNorm) {
        for (int m = warp; m < M; m += kWarps) {  // a warp per row: fp32 sum of squares, fixed order
            float ss = 0.f;
            for (int k = lane * 8; k < K; k += 32 * 8) {
                float v[8];
                Vec8<T>::load(x + static_cast<int64_t>(m) * K + k, v);
#pragma unroll
                for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
            }
            for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
            if (lane == 0) inv_rms[m] = rsqrtf(ss / static_cast<float>(K) + eps);
        }
        __syncthreads();
    }
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
        float wv[kCols][8], xv[MR][8], g[8];
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
            if (n0 + c < N) {
                Vec8<T>::load(w + static_cast<int64_t>(n0 + c) * K + k, wv[c]);
            } else {
#pragma unroll
                for (int i = 0; i < 8; ++i) wv[c][i] = 0.f;
            }
        }
        if constexpr (PRO == kNorm) Vec8<T>::load(norm_w + k, g);
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            if (m < M) {
                load_x<T, PRO>(x, m, k, K, g, PRO == kNorm ? inv_rms[m] : 0.f, xv[m]);
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
            if (lane == 0 && m < M && n0 + c < N) {
                const int64_t at = static_cast<int64_t>(m) * N + n0 + c;
                v += b ? to_f(b[n0 + c]) : 0.f;
                out[at] = residual ? from_f<T>(to_f(residual[at]) + round_to<T>(v)) : from_f<T>(v);
            }
        }
    }
}

}  // namespace

at::Tensor skinny_linear_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const SkinnyOptions& o) {
    auto bad = [&](const at::Tensor& t, std::initializer_list<int64_t> shape) {
        return t.defined() && (t.sizes() != at::IntArrayRef(shape) || !t.is_contiguous() || t.scalar_type() != w.scalar_type() ||
                               t.device() != w.device());
    };
    if (!skinny_linear_fits(x, w, o.swiglu) || (o.swiglu && o.norm_weight.defined()) || bad(b, {w.size(0)}) ||
        bad(o.norm_weight, {w.size(1)}) || bad(o.residual, {x.size(0), w.size(0)})) {
        fail(Status::kInternal, "skinny_linear: x [M <= 16, K % 8 == 0] (or [M, 2K] with swiglu), w [N, K] 16-byte aligned, b [N], "
                                "norm weight [K], residual [M, N]: contiguous, one dtype and device");
    }
    c10::cuda::CUDAGuard guard(x.device());
    const int M = static_cast<int>(x.size(0)), K = static_cast<int>(w.size(1)), N = static_cast<int>(w.size(0));
    at::Tensor out = at::empty({M, N}, x.options());
    if (N == 0) return out;
    const int per_block = kWarps * kCols;
    const unsigned blocks = static_cast<unsigned>((N + per_block - 1) / per_block);
    auto stream = at::cuda::getCurrentCUDAStream();
    const int pro = o.norm_weight.defined() ? kNorm : (o.swiglu ? kSwiglu : kPlain);
    CN_DISPATCH_FLOAT_TYPES(x.scalar_type(), "skinny_linear", [&] {
        using T = scalar_t;
        auto ptr = [](const at::Tensor& t) { return t.defined() ? reinterpret_cast<const T*>(t.const_data_ptr()) : nullptr; };
        const T *xp = ptr(x), *wp = ptr(w), *bp = ptr(b), *gp = ptr(o.norm_weight), *rp = ptr(o.residual);
        auto* op = reinterpret_cast<T*>(out.data_ptr());
        const float eps = static_cast<float>(o.norm_eps);
        auto launch = [&](auto mr) {
            constexpr int MR = decltype(mr)::value;
            const int threads = kWarps * 32;
            if (pro == kNorm) skinny_kernel<T, MR, kNorm><<<blocks, threads, 0, stream>>>(xp, wp, bp, gp, eps, rp, op, M, K, N);
            else if (pro == kSwiglu) skinny_kernel<T, MR, kSwiglu><<<blocks, threads, 0, stream>>>(xp, wp, bp, gp, eps, rp, op, M, K, N);
            else skinny_kernel<T, MR, kPlain><<<blocks, threads, 0, stream>>>(xp, wp, bp, gp, eps, rp, op, M, K, N);
        };
        if (M <= 1) launch(std::integral_constant<int, 1>{});
        else if (M <= 2) launch(std::integral_constant<int, 2>{});
        else if (M <= 4) launch(std::integral_constant<int, 4>{});
        else if (M <= 8) launch(std::integral_constant<int, 8>{});
        else launch(std::integral_constant<int, 16>{});
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out;
}

}  // namespace cn::kernels
