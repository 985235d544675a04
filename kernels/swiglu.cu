// CUDA path of swiglu: one thread per output element.
#include "kernels/swiglu.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {

void check_swiglu(const at::Tensor& x);  // swiglu.cpp

namespace {

using cuda::from_f;
using cuda::round_to;
using cuda::to_f;

template <class T>
__global__ void swiglu_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t F, int64_t row_stride, int64_t total) {
    const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (t >= total) return;
    const int64_t r = t / F, j = t % F;
    const float a = to_f(x[r * row_stride + j]), b = to_f(x[r * row_stride + F + j]);
    const float s = round_to<T>(a / (1.0f + expf(-a)));
    out[t] = from_f<T>(s * b);
}

}  // namespace

at::Tensor swiglu_cuda(const at::Tensor& x) {
    check_swiglu(x);
    c10::cuda::CUDAGuard guard(x.device());
    const int64_t R = x.size(0), F = x.size(1) / 2, total = R * F;
    at::Tensor out = at::empty({R, F}, x.options());
    if (total == 0) return out;
    const int threads = 256;
    const int64_t blocks = (total + threads - 1) / threads;
    if (blocks > INT32_MAX) fail(Status::kInvalidArgument, "swiglu: tensor too large for one launch");
    CN_DISPATCH_FLOAT_TYPES(x.scalar_type(), "swiglu", [&] {
        swiglu_kernel<scalar_t><<<static_cast<unsigned>(blocks), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            reinterpret_cast<const scalar_t*>(x.const_data_ptr()), reinterpret_cast<scalar_t*>(out.data_ptr()), F, x.stride(0), total);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out;
}

}  // namespace cn::kernels
