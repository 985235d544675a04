// CUDA paths of chronos2_preprocess (one block per series: its first warp computes the statistics in the
// reference's summation order, then the block writes the token features), chronos2_instance_stats (a warp
// per series) and chronos2_postprocess (one thread per output value).
#include "kernels/chronos2_io.h"

#include <cfloat>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cascade_sum.cuh"
#include "kernels/cuda_util.cuh"

namespace cn::kernels {
namespace {

using cuda::from_f;
using cuda::round_to;
using cuda::to_f;

__device__ __forceinline__ float finite_or_max(float v) { return isinf(v) ? (v > 0 ? FLT_MAX : -FLT_MAX) : v; }

// chronos2_io.cpp's instance_stats on one warp (every lane gets the results); IEEE division and square root,
// no contraction of the square into the sums.
__device__ __forceinline__ void warp_instance_stats(const float* __restrict__ x, int64_t L, float eps, float& loc_out, float& scale_out) {
    const unsigned full = 0xffffffffu;
    const int lane = static_cast<int>(threadIdx.x % 32);
    int64_t count = 0;
    for (int64_t t = lane; t < L; t += 32) count += isnan(x[t]) ? 0 : 1;
    for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(full, count, o);  // integers: any order
    const float n = static_cast<float>(count);
    const float sum = aten_sum::warp_row_sum([&](int64_t i) { return isnan(x[i]) ? 0.f : x[i]; }, L);
    float loc = __fdiv_rn(sum, n);
    loc = isnan(loc) ? 0.f : finite_or_max(loc);
    const float sq = aten_sum::warp_row_sum(
        [&](int64_t i) {
            const float d = __fsub_rn(x[i], loc);
            const float q = __fmul_rn(d, d);
            return isnan(q) ? 0.f : q;
        },
        L);
    float scale = __fsqrt_rn(__fdiv_rn(sq, n));
    scale = isnan(scale) ? 1.f : finite_or_max(scale);
    loc_out = loc;
    scale_out = scale == 0.f ? eps : scale;
}

__global__ void instance_stats_kernel(const float* __restrict__ ctx, int64_t B, int64_t L, float eps, float* __restrict__ locp,
                                      float* __restrict__ scalep) {
    const int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
    if (b >= B) return;  // whole warps leave together
    float loc, scale;
    warp_instance_stats(ctx + b * L, L, eps, loc, scale);
    if (threadIdx.x % 32 == 0) {
        locp[b] = loc;
        scalep[b] = scale;
    }
}

template <class T>
__global__ void preprocess_kernel(const float* __restrict__ ctx, const float* __restrict__ fut, int64_t L, int64_t F, int64_t P, int64_t N,
                                  int64_t p, int64_t reg, float inv_ts, bool arcsinh, float eps, float minv, T* __restrict__ feats,
                                  T* __restrict__ valid, T* __restrict__ bias, float* __restrict__ locp, float* __restrict__ scalep) {
    const int64_t b = blockIdx.x;
    const float* x = ctx + b * L;
    __shared__ float stats[2];
    if (threadIdx.x < 32) {
        float l, sc;
        warp_instance_stats(x, L, eps, l, sc);
        if (threadIdx.x == 0) {
            stats[0] = l;
            stats[1] = sc;
            locp[b] = l;
            scalep[b] = sc;
        }
    }
    __syncthreads();
    const float loc = stats[0], scale = stats[1];
    const int64_t S = P + 1 + N, pad = P * p - L;
    T* fb = feats + b * (P + reg + N) * 3 * p;
    for (int64_t e = threadIdx.x; e < reg * 3 * p; e += blockDim.x) fb[P * 3 * p + e] = from_f<T>(0.f);  // the REG slot
    // Context tokens, then future tokens (after the REG slot): one (token, k) element per iteration.
    for (int64_t e = threadIdx.x; e < (P + N) * p; e += blockDim.x) {
        const int64_t t = e / p, k = e % p;
        float v, time;
        if (t < P) {
            const int64_t src = e - pad;
            v = src >= 0 ? x[src] : __int_as_float(0x7fc00000);
            time = static_cast<float>(e - P * p) * inv_ts;  // ATen on CUDA divides by a scalar as a * (1 / b)
        } else {
            const int64_t j = e - P * p;
            v = (fut && j < F) ? fut[b * F + j] : __int_as_float(0x7fc00000);
            time = static_cast<float>(j) * inv_ts;
        }
        const bool seen = !isnan(v);
        float z = 0.f;
        if (seen) {
            z = (v - loc) / scale;
            if (arcsinh) z = asinhf(z);
        }
        T* f = fb + (t < P ? t : t + reg) * 3 * p;
        f[k] = from_f<T>(time);
        f[p + k] = from_f<T>(z);
        f[2 * p + k] = from_f<T>(seen ? 1.f : 0.f);
    }
    for (int64_t t = threadIdx.x; t < S; t += blockDim.x) {
        bool any = true;
        if (t < P) {
            any = false;
            for (int64_t k = 0; k < p; ++k) {
                const int64_t src = t * p + k - pad;
                any = any || (src >= 0 && !isnan(x[src]));
            }
        }
        valid[b * S + t] = from_f<T>(any ? 1.f : 0.f);
        bias[b * S + t] = from_f<T>(any ? 0.f : minv);
    }
}

template <class T>
__global__ void postprocess_kernel(const T* __restrict__ head, const float* __restrict__ loc, const float* __restrict__ scale, int64_t N,
                                   int64_t Q, int64_t p, bool arcsinh, float* __restrict__ out, int64_t total) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= total) return;
    // i indexes the output [B, Q, N p]
    const int64_t k = i % p;
    int64_t r = i / p;
    const int64_t n = r % N;
    r /= N;
    const int64_t q = r % Q, b = r / Q;
    float v = to_f(head[((b * N + n) * Q + q) * p + k]);
    if (arcsinh) v = sinhf(v);
    out[i] = __fadd_rn(__fmul_rn(v, scale[b]), loc[b]);
}

template <class T>
float lowest();
template <>
float lowest<float>() {
    return -FLT_MAX;
}
template <>
float lowest<__nv_bfloat16>() {
    return -3.38953139e38f;
}  // -(2 - 2^-7) * 2^127
template <>
float lowest<__half>() {
    return -65504.f;
}

}  // namespace

void chronos2_preprocess_cuda(const at::Tensor& context, const at::Tensor& future, const Chronos2PrepParams& p, Chronos2Prep& o) {
    c10::cuda::CUDAGuard guard(context.device());
    const int64_t B = context.size(0);
    if (B == 0) return;
    if (B > INT32_MAX) fail(Status::kInvalidArgument, "chronos2_preprocess: too many rows for one launch");
    auto stream = at::cuda::getCurrentCUDAStream();
    const float inv_ts = 1.0f / static_cast<float>(p.time_scale);
    CN_DISPATCH_FLOAT_TYPES(p.dtype, "chronos2_preprocess", [&] {
        preprocess_kernel<scalar_t><<<static_cast<unsigned>(B), 256, 0, stream>>>(
            context.const_data_ptr<float>(), future.defined() ? future.const_data_ptr<float>() : nullptr, context.size(1),
            future.defined() ? future.size(1) : 0, o.context_patches, p.output_patches, p.patch, p.reg_slot ? 1 : 0, inv_ts, p.arcsinh,
            static_cast<float>(p.eps), lowest<scalar_t>(), reinterpret_cast<scalar_t*>(o.feats.data_ptr()),
            reinterpret_cast<scalar_t*>(o.valid.data_ptr()), reinterpret_cast<scalar_t*>(o.time_bias.data_ptr()), o.loc.data_ptr<float>(),
            o.scale.data_ptr<float>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
}

void chronos2_instance_stats_cuda(const at::Tensor& context, double eps, Chronos2Stats& o) {
    c10::cuda::CUDAGuard guard(context.device());
    const int64_t B = context.size(0);
    if (B == 0) return;
    constexpr int64_t kWarps = 4;  // rows per block
    const int64_t blocks = (B + kWarps - 1) / kWarps;
    if (blocks > INT32_MAX) fail(Status::kInvalidArgument, "chronos2_instance_stats: too many rows for one launch");
    instance_stats_kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(32 * kWarps), 0, at::cuda::getCurrentCUDAStream()>>>(
        context.const_data_ptr<float>(), B, context.size(1), static_cast<float>(eps), o.loc.data_ptr<float>(), o.scale.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void chronos2_postprocess_cuda(const at::Tensor& head, const at::Tensor& loc, const at::Tensor& scale, int64_t Q, int64_t p, bool arcsinh,
                               const at::Tensor& out) {
    c10::cuda::CUDAGuard guard(head.device());
    const int64_t total = out.numel();
    if (total == 0) return;
    const int threads = 256;
    const int64_t blocks = (total + threads - 1) / threads;
    if (blocks > INT32_MAX) fail(Status::kInvalidArgument, "chronos2_postprocess: output too large for one launch");
    auto stream = at::cuda::getCurrentCUDAStream();
    CN_DISPATCH_FLOAT_TYPES(head.scalar_type(), "chronos2_postprocess", [&] {
        postprocess_kernel<scalar_t><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
            reinterpret_cast<const scalar_t*>(head.const_data_ptr()), loc.const_data_ptr<float>(), scale.const_data_ptr<float>(),
            head.size(1), Q, p, arcsinh, out.data_ptr<float>(), total);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
}

}  // namespace cn::kernels
