// CUDA path of rope_attention (kernels/rope_attention.h).
#include "kernels/rope_attention.h"

#include <cfloat>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {
namespace {

using cuda::from_f;
using cuda::round_to;
using cuda::to_f;
using rope_attention_detail::kQueriesPerBlock;
using rope_attention_detail::kWarps;

// x * c - y * n and y * c + x * n, rounded to T after every op (kernels/rope.h).
template <class T>
__device__ __forceinline__ void rotate(float x1, float x2, float c, float n, float& y1, float& y2) {
    y1 = round_to<T>(round_to<T>(__fmul_rn(x1, c)) - round_to<T>(__fmul_rn(x2, n)));
    y2 = round_to<T>(round_to<T>(__fmul_rn(x2, c)) + round_to<T>(__fmul_rn(x1, n)));
}

// grid (B * H, ceil(S / kQueriesPerBlock)), kWarps warps.
template <class T>
__global__ void __launch_bounds__(kWarps * 32)
    rope_attention_kernel(const T* __restrict__ qkv, const T* __restrict__ bias, const float* __restrict__ inv, T* __restrict__ out, int S,
                          int H, int dk) {
    extern __shared__ float sm[];
    const int b = blockIdx.x / H, h = blockIdx.x % H;
    const int q0 = blockIdx.y * kQueriesPerBlock;
    const int nq = min(kQueriesPerBlock, S - q0);
    const int half = dk / 2, kstride = dk + 1, I = H * dk;
    float* ks = sm;                          // [S][dk + 1]
    float* vs = ks + S * kstride;            // [S][dk]
    float* qs = vs + S * dk;                 // [kQueriesPerBlock][dk]
    float* sc = qs + kQueriesPerBlock * dk;  // [kWarps][S]
    float* mask = sc + kWarps * S;           // [S]
    const T* base = qkv + static_cast<int64_t>(b) * S * 3 * I;

    // K rotated and V of every token; q rotated for this block's queries.
    for (int t = threadIdx.x; t < S * half; t += blockDim.x) {
        const int s = t / half, i = t % half;
        const T* row = base + static_cast<int64_t>(s) * 3 * I;
        const float f = inv[i] * static_cast<float>(s);
        const float c = round_to<T>(cosf(f)), n = round_to<T>(sinf(f));
        float y1, y2;
        rotate<T>(to_f(row[I + h * dk + i]), to_f(row[I + h * dk + i + half]), c, n, y1, y2);
        ks[s * kstride + i] = y1;
        ks[s * kstride + i + half] = y2;
        vs[s * dk + i] = to_f(row[2 * I + h * dk + i]);
        vs[s * dk + i + half] = to_f(row[2 * I + h * dk + i + half]);
        if (s >= q0 && s < q0 + nq) {
            rotate<T>(to_f(row[h * dk + i]), to_f(row[h * dk + i + half]), c, n, y1, y2);
            qs[(s - q0) * dk + i] = y1;
            qs[(s - q0) * dk + i + half] = y2;
        }
    }
    for (int s = threadIdx.x; s < S; s += blockDim.x) mask[s] = to_f(bias[static_cast<int64_t>(b) * S + s]);
    __syncthreads();

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float* row_sc = sc + warp * S;
    for (int qi = warp; qi < nq; qi += kWarps) {
        const float* q = qs + qi * dk;
        // Scores: a lane per key, each a sequential fp32 sum over the head dim.
        float mx = -FLT_MAX;
        for (int j = lane; j < S; j += 32) {
            const float* k = ks + j * kstride;
            float acc = 0.0f;
            for (int d = 0; d < dk; ++d) acc = fmaf(q[d], k[d], acc);
            acc += mask[j];
            row_sc[j] = acc;
            mx = fmaxf(mx, acc);
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
        // Output: a lane per dimension, a sequential sum over the keys.
        T* o_row = out + (static_cast<int64_t>(b) * S + q0 + qi) * I + h * dk;
        for (int d = lane; d < dk; d += 32) {
            float acc = 0.0f;
            for (int j = 0; j < S; ++j) acc = fmaf(row_sc[j], vs[j * dk + d], acc);
            o_row[d] = from_f<T>(acc / l);
        }
        __syncwarp();
    }
}

}  // namespace

at::Tensor rope_attention_cuda(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t H) {
    const int64_t B = qkv.size(0), S = qkv.size(1), dk = qkv.size(2) / (3 * H);
    at::Tensor out = at::empty({B, S, H * dk}, qkv.options());
    if (B == 0 || S == 0) return out;
    if (!rope_attention_fits(S, dk) || B * H > INT32_MAX) fail(Status::kInternal, "rope_attention: shape beyond the CUDA path");
    const c10::cuda::CUDAGuard guard(qkv.device());
    const size_t shared = static_cast<size_t>(rope_attention_detail::shared_bytes(S, dk));
    const dim3 grid(static_cast<unsigned>(B * H), static_cast<unsigned>((S + kQueriesPerBlock - 1) / kQueriesPerBlock));
    auto stream = at::cuda::getCurrentCUDAStream();
    CN_DISPATCH_FLOAT_TYPES(qkv.scalar_type(), "rope_attention", [&] {
        auto kernel = rope_attention_kernel<scalar_t>;
        if (shared > 48 * 1024)
            C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
        kernel<<<grid, kWarps * 32, shared, stream>>>(reinterpret_cast<const scalar_t*>(qkv.const_data_ptr()),
                                                      reinterpret_cast<const scalar_t*>(bias.const_data_ptr()),
                                                      inv_freq.const_data_ptr<float>(), reinterpret_cast<scalar_t*>(out.data_ptr()),
                                                      static_cast<int>(S), static_cast<int>(H), static_cast<int>(dk));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out;
}

}  // namespace cn::kernels
