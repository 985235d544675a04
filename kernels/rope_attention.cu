// CUDA path of rope_attention (kernels/rope_attention.h).
#include "kernels/rope_attention.h"

#include <cfloat>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"
#include "kernels/rope.cuh"
#include "kernels/rope.h"

namespace cn::kernels {
namespace {

using cuda::from_f;
using cuda::rope_rotate;
using cuda::to_f;
using rope_attention_detail::kQueriesPerBlock;
using rope_attention_detail::kWarps;

// Loads n consecutive elements of T as fp32 (n = 16 / sizeof(T): one 16-byte load).
template <class T>
__device__ __forceinline__ void load16(const T* src, float* dst) {
    constexpr int n = 16 / sizeof(T);
    const uint4 raw = *reinterpret_cast<const uint4*>(src);
    const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int e = 0; e < n; ++e) dst[e] = to_f(v[e]);
}

// grid (B * H, ceil(S / kQueriesPerBlock)), kWarps warps. DK = 64: the head dim fixed at compile time (the query in
// registers, 16-byte shared-memory accesses); DK = 0: any even dk. Both compute every sum in the same order, fixed
// for a given (S, dk): nothing depends on the batch.
template <class T, int DK>
__global__ void __launch_bounds__(kWarps * 32)
    rope_attention_kernel(const T* __restrict__ qkv, const T* __restrict__ bias, const float2* __restrict__ table, T* __restrict__ out,
                          int S, int H, int dk_arg, bool vec) {
    extern __shared__ __align__(16) float sm[];
    const int dk = DK > 0 ? DK : dk_arg;
    const int b = blockIdx.x / H, h = blockIdx.x % H;
    const int q0 = blockIdx.y * kQueriesPerBlock;
    const int nq = min(kQueriesPerBlock, S - q0);
    const int half = dk / 2, kstride = dk + 4, I = H * dk;
    float* ks = sm;                          // [S][dk + 4]
    float* vs = ks + S * kstride;            // [S][dk]
    float* qs = vs + S * dk;                 // [kQueriesPerBlock][dk]
    float* sc = qs + kQueriesPerBlock * dk;  // [kWarps][S]
    float* mask = sc + kWarps * S;           // [S]
    const T* base = qkv + static_cast<int64_t>(b) * S * 3 * I + h * dk;

    // 1. The raw values: K and V of every token, q of this block's queries (rows r: K 0..S-1, V S..2S-1, q after).
    const int rows = 2 * S + nq;
    auto row_src = [&](int r, const T*& src, float*& dst) {
        if (r < S) {
            src = base + static_cast<int64_t>(r) * 3 * I + I, dst = ks + r * kstride;
        } else if (r < 2 * S) {
            src = base + static_cast<int64_t>(r - S) * 3 * I + 2 * I, dst = vs + (r - S) * dk;
        } else {
            src = base + static_cast<int64_t>(q0 + r - 2 * S) * 3 * I, dst = qs + (r - 2 * S) * dk;
        }
    };
    if (vec) {  // dk and every row offset a multiple of 16 / sizeof(T), the base 16-byte aligned
        constexpr int n = 16 / sizeof(T);
        const int per_row = dk / n;
        for (int c = threadIdx.x; c < rows * per_row; c += blockDim.x) {
            const T* src;
            float* dst;
            row_src(c / per_row, src, dst);
            const int d = (c % per_row) * n;
            load16<T>(src + d, dst + d);
        }
    } else {
        for (int c = threadIdx.x; c < rows * dk; c += blockDim.x) {
            const T* src;
            float* dst;
            row_src(c / dk, src, dst);
            dst[c % dk] = to_f(src[c % dk]);
        }
    }
    for (int s = threadIdx.x; s < S; s += blockDim.x) mask[s] = to_f(bias[static_cast<int64_t>(b) * S + s]);
    __syncthreads();
    // 2. RoPE in place on the keys and the queries.
    for (int t = threadIdx.x; t < (S + nq) * half; t += blockDim.x) {
        const int r = t / half, i = t % half;
        const int s = r < S ? r : q0 + r - S;
        float* x = r < S ? ks + r * kstride : qs + (r - S) * dk;
        float y1, y2;
        rope_rotate<T>(x[i], x[i + half], table[s * half + i], y1, y2);
        x[i] = y1;
        x[i + half] = y2;
    }
    __syncthreads();

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float* row_sc = sc + warp * S;
    for (int qi = warp; qi < nq; qi += kWarps) {
        const float* q = qs + qi * dk;
        // Scores: a lane per key; the dot product over dk as four partial sums (d mod 4), combined in a fixed order.
        float mx = -FLT_MAX;
        if constexpr (DK == 64) {
            float4 qr[16];
#pragma unroll
            for (int m = 0; m < 16; ++m) qr[m] = reinterpret_cast<const float4*>(q)[m];
            for (int j = lane; j < S; j += 32) {
                const float4* k4 = reinterpret_cast<const float4*>(ks + j * kstride);
                float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
                for (int m = 0; m < 16; ++m) {
                    const float4 kv = k4[m];
                    a0 = fmaf(qr[m].x, kv.x, a0);
                    a1 = fmaf(qr[m].y, kv.y, a1);
                    a2 = fmaf(qr[m].z, kv.z, a2);
                    a3 = fmaf(qr[m].w, kv.w, a3);
                }
                const float acc = ((a0 + a1) + (a2 + a3)) + mask[j];
                row_sc[j] = acc;
                mx = fmaxf(mx, acc);
            }
        } else {
            const int d4 = dk & ~3;
            for (int j = lane; j < S; j += 32) {
                const float* k = ks + j * kstride;
                float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
                for (int d = 0; d < d4; d += 4) {
                    a0 = fmaf(q[d], k[d], a0);
                    a1 = fmaf(q[d + 1], k[d + 1], a1);
                    a2 = fmaf(q[d + 2], k[d + 2], a2);
                    a3 = fmaf(q[d + 3], k[d + 3], a3);
                }
                if (d4 < dk) {  // dk = 4m + 2
                    a0 = fmaf(q[d4], k[d4], a0);
                    a1 = fmaf(q[d4 + 1], k[d4 + 1], a1);
                }
                const float acc = ((a0 + a1) + (a2 + a3)) + mask[j];
                row_sc[j] = acc;
                mx = fmaxf(mx, acc);
            }
        }
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        float l = 0.0f;
        for (int j = lane; j < S; j += 32) {
            const float e = expf(row_sc[j] - mx);
            row_sc[j] = e;
            l += e;
        }
        for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
        __syncwarp();
        // Output: a lane per dimension; the sum over keys as two partial sums (even and odd keys).
        T* o_row = out + (static_cast<int64_t>(b) * S + q0 + qi) * I + h * dk;
        if constexpr (DK == 64) {  // dims 2 lane and 2 lane + 1
            float e0 = 0.0f, e1 = 0.0f, f0 = 0.0f, f1 = 0.0f;
            int j = 0;
            for (; j + 1 < S; j += 2) {
                const float p0 = row_sc[j], p1 = row_sc[j + 1];
                const float2 v0 = reinterpret_cast<const float2*>(vs + j * DK)[lane];
                const float2 v1 = reinterpret_cast<const float2*>(vs + (j + 1) * DK)[lane];
                e0 = fmaf(p0, v0.x, e0);
                e1 = fmaf(p1, v1.x, e1);
                f0 = fmaf(p0, v0.y, f0);
                f1 = fmaf(p1, v1.y, f1);
            }
            if (j < S) {
                const float2 v0 = reinterpret_cast<const float2*>(vs + j * DK)[lane];
                e0 = fmaf(row_sc[j], v0.x, e0);
                f0 = fmaf(row_sc[j], v0.y, f0);
            }
            o_row[2 * lane] = from_f<T>((e0 + e1) / l);
            o_row[2 * lane + 1] = from_f<T>((f0 + f1) / l);
        } else {
            for (int d = lane; d < dk; d += 32) {
                float e0 = 0.0f, e1 = 0.0f;
                int j = 0;
                for (; j + 1 < S; j += 2) {
                    e0 = fmaf(row_sc[j], vs[j * dk + d], e0);
                    e1 = fmaf(row_sc[j + 1], vs[(j + 1) * dk + d], e1);
                }
                if (j < S) e0 = fmaf(row_sc[j], vs[j * dk + d], e0);
                o_row[d] = from_f<T>((e0 + e1) / l);
            }
        }
        __syncwarp();
    }
}

}  // namespace

at::Tensor rope_attention_cuda(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t H,
                               const at::Tensor& table_in, bool generic) {
    const int64_t B = qkv.size(0), S = qkv.size(1), dk = qkv.size(2) / (3 * H);
    at::Tensor out = at::empty({B, S, H * dk}, qkv.options());
    if (B == 0 || S == 0) return out;
    if (!rope_attention_fits(S, dk) || B * H > INT32_MAX) fail(Status::kInternal, "rope_attention: shape beyond the CUDA path");
    const at::Tensor table = table_in.defined() ? table_in : rope_table_cuda(inv_freq, S, qkv.scalar_type());
    if (table.dim() != 3 || table.size(0) < S || table.size(1) != dk / 2 || table.size(2) != 2 || table.scalar_type() != at::kFloat ||
        !table.is_contiguous() || table.device() != qkv.device()) {
        fail(Status::kInternal, "rope_attention: table must be rope_table(inv_freq, S, dtype)");
    }
    const c10::cuda::CUDAGuard guard(qkv.device());
    const size_t shared = static_cast<size_t>(rope_attention_detail::shared_bytes(S, dk));
    const dim3 grid(static_cast<unsigned>(B * H), static_cast<unsigned>((S + kQueriesPerBlock - 1) / kQueriesPerBlock));
    auto stream = at::cuda::getCurrentCUDAStream();
    CN_DISPATCH_FLOAT_TYPES(qkv.scalar_type(), "rope_attention", [&] {
        constexpr int n = 16 / sizeof(scalar_t);
        const bool vec = dk % n == 0 && reinterpret_cast<uintptr_t>(qkv.const_data_ptr()) % 16 == 0;
        auto kernel = dk == 64 && !generic ? rope_attention_kernel<scalar_t, 64> : rope_attention_kernel<scalar_t, 0>;
        if (shared > 48 * 1024)
            C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
        kernel<<<grid, kWarps * 32, shared, stream>>>(
            reinterpret_cast<const scalar_t*>(qkv.const_data_ptr()), reinterpret_cast<const scalar_t*>(bias.const_data_ptr()),
            reinterpret_cast<const float2*>(table.const_data_ptr()), reinterpret_cast<scalar_t*>(out.data_ptr()), static_cast<int>(S),
            static_cast<int>(H), static_cast<int>(dk), vec);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out;
}

}  // namespace cn::kernels
