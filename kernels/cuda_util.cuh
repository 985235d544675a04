// Device helpers shared by cutenative's CUDA kernels: element types, exact rounding to the storage dtype,
// and a deterministic block reduction (fixed order for a fixed block size, so results never depend on
// how many rows a launch holds).
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include <cuda_runtime.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <c10/core/ScalarType.h>

#include "core/common/status.h"

namespace cn::kernels::cuda {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
    return __float2half_rn(v);
}

// Rounds an fp32 value to T's precision and back (identity for float).
template <class T>
__device__ __forceinline__ float round_to(float v) {
    return to_f(from_f<T>(v));
}

// V elements of T moved as one aligned load or store (16 bytes when V = 16 / sizeof(T)).
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
    T v[V];
};

// Sum over the warp by a butterfly (offsets 16, 8, 4, 2, 1); every lane gets the same result, each step adding a pair
// of equal partial sums in both of its lanes. block_sum's per-warp step: a kernel that must reproduce block_sum's
// order with one warp (kernels/rms_norm.cu) calls this.
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block; every thread gets the result. Fixed tree order for a given blockDim: warp_sum in each warp, then
// warp_sum of the warps' sums (lane i holding warp i's, the rest zero).
template <class T, int kMaxWarps = 32>
__device__ __forceinline__ T block_sum(T v) {
    __shared__ T partial[kMaxWarps];
    __shared__ T total;
    v = warp_sum(v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warps = (blockDim.x + 31) / 32;
    __syncthreads();  // partial/total may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const T s = warp_sum(lane < warps ? partial[lane] : T(0));
        if (lane == 0) total = s;
    }
    __syncthreads();
    return total;
}

// Maximum over the block (fmaxf: a NaN loses to a number); every thread gets the result.
__device__ __forceinline__ float block_max(float v) {
    __shared__ float partial[32];
    __shared__ float total;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float m = lane < warps ? partial[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0) total = m;
    }
    __syncthreads();
    return total;
}

// Programmatic dependent launch (sm_90; no-ops before): a kernel started with launch_pdl may begin while the
// previous kernel of the stream still runs. Such a kernel calls pdl_trigger() first (so the next one may start
// early in turn), may read constant data (weights) right away, and must call pdl_wait() before it reads or
// writes anything an earlier kernel of the stream writes or reads: the wait returns once the previous kernel
// has completed and its memory is visible (and, since every kernel launched this way waits before it finishes,
// so have all earlier ones).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether launch_pdl allows early starts: yes unless the environment sets CN_PDL=0 (read once; for measuring
// the difference: the kernels are correct either way).
inline bool pdl_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("CN_PDL");
        return !(v && std::string(v) == "0");
    }();
    return on;
}

// Launches kernel<<<grid, block, smem, stream>>>(args...) in thread-block clusters of `cluster` blocks (sm_90; none
// when it is 1 x 1 x 1) with programmatic stream serialisation allowed (see pdl_wait); in a captured graph the
// dependency becomes a programmatic edge.
template <class... Params, class... Args>
void launch_pdl_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster, size_t smem, cudaStream_t stream, Args&&... args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[2];
    unsigned n = 0;
    if (pdl_enabled()) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster.x * cluster.y * cluster.z > 1) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = cluster.x;
        attr[n].val.clusterDim.y = cluster.y;
        attr[n++].val.clusterDim.z = cluster.z;
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
    const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
    if (err != cudaSuccess) ::cn::fail(::cn::Status::kInternal, std::string("kernel launch: ") + cudaGetErrorString(err));
}
// The same without clusters.
template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
    launch_pdl_cluster(kernel, grid, block, dim3(1, 1, 1), smem, stream, std::forward<Args>(args)...);
}

}  // namespace cn::kernels::cuda

// Calls F<T>() with T the CUDA element type of a float / bf16 / f16 tensor; other dtypes are refused.
#define CN_DISPATCH_FLOAT_TYPES(dtype, name, ...)                                                       \
    [&] {                                                                                               \
        switch (dtype) {                                                                                \
            case c10::kFloat: {                                                                         \
                using scalar_t = float;                                                                 \
                return __VA_ARGS__();                                                                   \
            }                                                                                           \
            case c10::kBFloat16: {                                                                      \
                using scalar_t = __nv_bfloat16;                                                         \
                return __VA_ARGS__();                                                                   \
            }                                                                                           \
            case c10::kHalf: {                                                                          \
                using scalar_t = __half;                                                                \
                return __VA_ARGS__();                                                                   \
            }                                                                                           \
            default: ::cn::fail(::cn::Status::kUnsupported, std::string(name) + ": unsupported dtype"); \
        }                                                                                               \
    }()
