// CUDA path of count_nonfinite: a grid-stride loop with one atomic per block.
#include "kernels/nonfinite.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/common/status.h"

namespace cn::kernels {
namespace {

__device__ inline float as_float(float v) { return v; }
__device__ inline float as_float(double v) { return static_cast<float>(v); }
__device__ inline float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float as_float(__half v) { return __half2float(v); }

template <class T>
__global__ void count_nonfinite_kernel(const T* __restrict__ p, int64_t n, unsigned long long* out) {
    __shared__ unsigned long long block_count;
    if (threadIdx.x == 0) block_count = 0;
    __syncthreads();
    unsigned long long local = 0;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        local += !isfinite(as_float(p[i]));
    }
    if (local) atomicAdd(&block_count, local);
    __syncthreads();
    if (threadIdx.x == 0 && block_count) atomicAdd(out, block_count);
}

template <class T>
int64_t launch(const at::Tensor& c) {
    const int64_t n = c.numel();
    auto out = at::zeros({1}, c.options().dtype(c10::kLong));
    if (n == 0) return 0;
    const int threads = 256;
    const int64_t want = (n + threads - 1) / threads;
    const int blocks = static_cast<int>(want < 4096 ? want : 4096);
    auto stream = at::cuda::getCurrentCUDAStream();
    count_nonfinite_kernel<T><<<blocks, threads, 0, stream>>>(reinterpret_cast<const T*>(c.const_data_ptr()), n,
                                                              reinterpret_cast<unsigned long long*>(out.data_ptr()));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out.item<int64_t>();
}

}  // namespace

int64_t count_nonfinite_cuda(const at::Tensor& t) {
    if (!c10::isFloatingType(t.scalar_type())) return 0;
    c10::cuda::CUDAGuard guard(t.device());
    const at::Tensor c = t.contiguous();
    switch (c.scalar_type()) {
        case c10::kFloat: return launch<float>(c);
        case c10::kDouble: return launch<double>(c);
        case c10::kBFloat16: return launch<__nv_bfloat16>(c);
        case c10::kHalf: return launch<__half>(c);
        default: fail(Status::kUnsupported, "count_nonfinite: unsupported dtype");
    }
}

}  // namespace cn::kernels
