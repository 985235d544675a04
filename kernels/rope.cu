// CUDA path of rope_: one thread per (row, i) pair of a [B, S, H, dk] strided view.
#include "kernels/rope.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {

void check_rope(const at::Tensor& x, const at::Tensor& inv_freq, const at::Tensor& pos_offset);  // rope.cpp

namespace {

using cuda::from_f;
using cuda::round_to;
using cuda::to_f;

// table: precomputed (round_T(cos f), round_T(sin f)) per (position, i), or null (computed here).
template <class T>
__global__ void rope_kernel(T* x, const float* __restrict__ inv, int64_t S, int64_t H, int64_t half, int64_t sb, int64_t ss, int64_t sh,
                            int64_t total, int64_t pos0, const int64_t* __restrict__ pos_offset, const float2* __restrict__ table) {
    const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (t >= total) return;
    const int64_t i = t % half;
    int64_t r = t / half;
    const int64_t h = r % H;
    r /= H;
    const int64_t s = r % S, b = r / S;
    float c, n;
    if (table) {
        const float2 cs = table[s * half + i];
        c = cs.x, n = cs.y;
    } else {
        const float f = inv[i] * static_cast<float>(s + pos0 + (pos_offset ? *pos_offset : 0));
        c = round_to<T>(cosf(f)), n = round_to<T>(sinf(f));
    }
    T* p = x + b * sb + s * ss + h * sh;
    const float x1 = to_f(p[i]), x2 = to_f(p[i + half]);
    p[i] = from_f<T>(round_to<T>(__fmul_rn(x1, c)) - round_to<T>(__fmul_rn(x2, n)));
    p[i + half] = from_f<T>(round_to<T>(__fmul_rn(x2, c)) + round_to<T>(__fmul_rn(x1, n)));
}

}  // namespace

void rope_cuda_(const at::Tensor& x, const at::Tensor& inv_freq, int64_t pos0, const at::Tensor& pos_offset, const at::Tensor& table) {
    check_rope(x, inv_freq, pos_offset);
    if (table.defined() &&
        (pos0 != 0 || pos_offset.defined() || table.dim() != 3 || table.size(0) < x.size(1) || table.size(1) != x.size(3) / 2 ||
         table.size(2) != 2 || table.scalar_type() != c10::kFloat || !table.is_contiguous() || table.device() != x.device())) {
        fail(Status::kInternal, "rope: a table needs positions from 0 and must be [>= S, dk/2, 2] fp32 on x's device");
    }
    c10::cuda::CUDAGuard guard(x.device());
    const int64_t half = x.size(3) / 2;
    const int64_t total = x.size(0) * x.size(1) * x.size(2) * half;
    if (total == 0) return;
    const int threads = 256;
    const int64_t blocks = (total + threads - 1) / threads;
    if (blocks > INT32_MAX) fail(Status::kInvalidArgument, "rope: tensor too large for one launch");
    auto stream = at::cuda::getCurrentCUDAStream();
    CN_DISPATCH_FLOAT_TYPES(x.scalar_type(), "rope", [&] {
        rope_kernel<scalar_t><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
            reinterpret_cast<scalar_t*>(x.data_ptr()), inv_freq.const_data_ptr<float>(), x.size(1), x.size(2), half, x.stride(0),
            x.stride(1), x.stride(2), total, pos0, pos_offset.defined() ? pos_offset.const_data_ptr<int64_t>() : nullptr,
            table.defined() ? reinterpret_cast<const float2*>(table.const_data_ptr()) : nullptr);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
}

}  // namespace cn::kernels
