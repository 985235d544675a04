// CUDA path of skinny_linear: block of 8 warps, each warp two output columns for all M rows; the norm is applied
// to x as it is loaded, the residual add or the SwiGLU gate to the outputs.
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
template <class T>
struct Vec8;
template <>
struct Vec8<float> {
    static __device__ __forceinline__ void load(const float* p, float (&v)[8]) {
        const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
};
template <class H>
struct Vec8Half {
    static __device__ __forceinline__ void load(const H* p, float (&v)[8]) {
        const uint4 a = *reinterpret_cast<const uint4*>(p);
        const H* h = reinterpret_cast<const H*>(&a);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = to_f(h[i]);
    }
};
template <>
struct Vec8<__nv_bfloat16> : Vec8Half<__nv_bfloat16> {};
template <>
struct Vec8<__half> : Vec8Half<__half> {};

// NORM: x is RMS-normalised as it is loaded. fp32: the scale is applied after the sum (sum_k (g_k x_k) w_nk *
// rsqrt(var + eps), the row's sum of squares taken by every warp from the loads it makes anyway: no barrier);
// half types round the normalised value to T first (round_T(g * round_T(x * rsqrt))), which needs the row's
// statistics before the sum: a warp per row computes them, then one barrier.
// GLU: the warp's two columns are j and j + N/2 (the w1 and w3 rows of a fused [w1 | w3]), and it writes
// swiglu(out_j, out_{j+N/2}) to column j of an [M, N/2] output.
template <class T, int MR, bool NORM, bool GLU>
__global__ void __launch_bounds__(kWarps * 32)
    skinny_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, const T* __restrict__ norm_w, float eps,
                  const T* __restrict__ residual, T* __restrict__ out, int M, int K, int N, const int64_t* __restrict__ rows, int64_t V) {
    // No shared memory and no barrier (but the half-precision norm's): every load of the step is independent
    // (x's few rows are read by every warp and stay in L1), so one launch costs about one memory round trip.
    constexpr bool kScaleAfter = NORM && std::is_same_v<T, float>;
    constexpr bool kRowStats = NORM && !kScaleAfter;
    cuda::pdl_trigger();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wi = blockIdx.x * kWarps + warp, half = N / 2;
    const bool active = wi < (GLU ? half : (N + kCols - 1) / kCols);
    int col[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) col[c] = GLU ? wi + c * half : wi * kCols + c;
    if (active) {  // the weights are constant: fetch this warp's rows into L2 while the previous kernel finishes
        const int lines = static_cast<int>((static_cast<int64_t>(K) * sizeof(T) + 127) / 128);
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
            if (col[c] >= N) continue;
            const char* row = reinterpret_cast<const char*>(w + static_cast<int64_t>(col[c]) * K);
            for (int i = lane; i < lines; i += 32) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + static_cast<int64_t>(i) * 128));
        }
    }
    cuda::pdl_wait();  // x, the rows, the residual and out belong to earlier kernels
    // The input's row m: x's row m, or the table's row rows[m] (clamped into it).
    auto row_index = [&](int m) -> int {
        if (!rows) return m;
        const int64_t r = rows[m];
        return static_cast<int>(r < 0 ? 0 : (r >= V ? V - 1 : r));
    };
    auto x_row = [&](int m) { return x + static_cast<int64_t>(row_index(m)) * K; };
    __shared__ float inv_rms[kRowStats ? MR : 1];
    if constexpr (kRowStats) {
        for (int m = warp; m < M; m += kWarps) {  // a warp per row: fp32 sum of squares, fixed order
            float ss = 0.f;
            for (int k = lane * 8; k < K; k += 32 * 8) {
                float v[8];
                Vec8<T>::load(x_row(m) + k, v);
#pragma unroll
                for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
            }
            for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
            if (lane == 0) inv_rms[m] = rsqrtf(ss / static_cast<float>(K) + eps);
        }
        __syncthreads();
    }
    if (!active) return;
    int xr[MR];  // the input rows' indices into x (32-bit: registers are scarce at MR = 16)
#pragma unroll
    for (int m = 0; m < MR; ++m) xr[m] = m < M ? row_index(m) : 0;
    float acc[kCols][MR], ss[MR];
#pragma unroll
    for (int m = 0; m < MR; ++m) {
        ss[m] = 0.f;
#pragma unroll
        for (int c = 0; c < kCols; ++c) acc[c][m] = 0.f;
    }
#pragma unroll 2
    for (int k = lane * 8; k < K; k += 32 * 8) {
        float wv[kCols][8], xv[MR][8], g[8];
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
            if (col[c] < N) {
                Vec8<T>::load(w + static_cast<int64_t>(col[c]) * K + k, wv[c]);
            } else {
#pragma unroll
                for (int i = 0; i < 8; ++i) wv[c][i] = 0.f;
            }
        }
        if constexpr (NORM) Vec8<T>::load(norm_w + k, g);
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            if (m < M) {
                Vec8<T>::load(x + static_cast<int64_t>(xr[m]) * K + k, xv[m]);
                if constexpr (kScaleAfter) {
#pragma unroll
                    for (int i = 0; i < 8; ++i) ss[m] += xv[m][i] * xv[m][i], xv[m][i] *= g[i];
                } else if constexpr (kRowStats) {
#pragma unroll
                    for (int i = 0; i < 8; ++i) xv[m][i] = round_to<T>(g[i] * round_to<T>(xv[m][i] * inv_rms[m]));
                }
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
    for (int m = 0; m < MR; ++m) {
        float inv = 1.f;
        if constexpr (kScaleAfter) {
            float v = ss[m];
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            inv = rsqrtf(v / static_cast<float>(K) + eps);
        }
        float r[kCols];
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
            float v = acc[c][m];
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            r[c] = (kScaleAfter ? v * inv : v) + ((b && col[c] < N) ? to_f(b[col[c]]) : 0.f);
        }
        if (lane != 0 || m >= M) continue;
        if constexpr (GLU) {
            const float a = round_to<T>(r[0]), s = round_to<T>(a / (1.0f + expf(-a)));
            out[static_cast<int64_t>(m) * half + wi] = from_f<T>(s * round_to<T>(r[1]));
        } else {
#pragma unroll
            for (int c = 0; c < kCols; ++c) {
                if (col[c] >= N) continue;
                const int64_t at = static_cast<int64_t>(m) * N + col[c];
                out[at] = residual ? from_f<T>(to_f(residual[at]) + round_to<T>(r[c])) : from_f<T>(r[c]);
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
    const int64_t rows_in = o.rows.defined() ? o.rows.numel() : x.size(0);
    if (!(o.rows.defined() ? skinny_table_fits(x, w, o.rows) : skinny_linear_fits(x, w)) ||
        (o.swiglu && (o.residual.defined() || w.size(0) % 2 != 0)) || bad(b, {w.size(0)}) || bad(o.norm_weight, {w.size(1)}) ||
        bad(o.residual, {rows_in, w.size(0)}) ||
        (o.norm_weight.defined() && reinterpret_cast<uintptr_t>(o.norm_weight.const_data_ptr()) % 16 != 0)) {
        fail(Status::kInternal,
             "skinny_linear: x [M <= 16, K % 8 == 0] (or a table with rows [M]), w [N, K] 16-byte aligned (N "
             "even with swiglu, then no residual), b [N], norm weight [K] 16-byte aligned, residual [M, N]: contiguous, one dtype and "
             "device");
    }
    if (x.size(0) > INT32_MAX) fail(Status::kInvalidArgument, "skinny_linear: table over 2^31 rows");
    c10::cuda::CUDAGuard guard(x.device());
    const int M = static_cast<int>(rows_in), K = static_cast<int>(w.size(1)), N = static_cast<int>(w.size(0));
    at::Tensor out = at::empty({M, o.swiglu ? N / 2 : N}, x.options());
    if (N == 0) return out;
    const int warps_needed = o.swiglu ? N / 2 : (N + kCols - 1) / kCols;
    const unsigned blocks = static_cast<unsigned>((warps_needed + kWarps - 1) / kWarps);
    auto stream = at::cuda::getCurrentCUDAStream();
    const bool norm = o.norm_weight.defined();
    CN_DISPATCH_FLOAT_TYPES(x.scalar_type(), "skinny_linear", [&] {
        using T = scalar_t;
        auto ptr = [](const at::Tensor& t) { return t.defined() ? reinterpret_cast<const T*>(t.const_data_ptr()) : nullptr; };
        const T *xp = ptr(x), *wp = ptr(w), *bp = ptr(b), *gp = ptr(o.norm_weight), *rp = ptr(o.residual);
        auto* op = reinterpret_cast<T*>(out.data_ptr());
        const float eps = static_cast<float>(o.norm_eps);
        auto launch = [&](auto mr) {
            constexpr int MR = decltype(mr)::value;
            const int threads = kWarps * 32;
            auto kernel = norm ? (o.swiglu ? skinny_kernel<T, MR, true, true> : skinny_kernel<T, MR, true, false>)
                               : (o.swiglu ? skinny_kernel<T, MR, false, true> : skinny_kernel<T, MR, false, false>);
            cuda::launch_pdl(kernel, dim3(blocks), dim3(threads), 0, stream, xp, wp, bp, gp, eps, rp, op, M, K, N,
                             o.rows.defined() ? o.rows.const_data_ptr<int64_t>() : nullptr, x.size(0));
        };
        if (M <= 1)
            launch(std::integral_constant<int, 1>{});
        else if (M <= 2)
            launch(std::integral_constant<int, 2>{});
        else if (M <= 4)
            launch(std::integral_constant<int, 4>{});
        else if (M <= 8)
            launch(std::integral_constant<int, 8>{});
        else
            launch(std::integral_constant<int, 16>{});
    });
    return out;
}

}  // namespace cn::kernels
