// CUDA path of rope_ (one thread per (row, i) pair of a [B, S, H, dk] strided view) and rope_table.
#include "kernels/rope.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <ATen/ops/empty.h>

#include "kernels/cuda_util.cuh"
#include "kernels/rope.cuh"

namespace cn::kernels {

void check_rope(const at::Tensor& x, const at::Tensor& inv_freq, const at::Tensor& pos_offset);  // rope.cpp

namespace {

using cuda::from_f;
using cuda::rope_cos_sin;
using cuda::rope_rotate;
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
    const float2 cs = table ? table[s * half + i] : rope_cos_sin<T>(inv[i], s + pos0 + (pos_offset ? *pos_offset : 0));
    T* p = x + b * sb + s * ss + h * sh;
    float y1, y2;
    rope_rotate<T>(to_f(p[i]), to_f(p[i + half]), cs, y1, y2);
    p[i] = from_f<T>(y1);
    p[i + half] = from_f<T>(y2);
}

// One thread per (s, i): the pair rope_kernel computes for position s.
template <class T>
__global__ void rope_table_kernel(const float* __restrict__ inv, float2* __restrict__ table, int S, int half) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= S * half) return;
    table[t] = rope_cos_sin<T>(inv[t % half], t / half);
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

at::Tensor rope_table_cuda(const at::Tensor& inv_freq, int64_t S, at::ScalarType dtype) {
    const int64_t half = inv_freq.size(0);
    at::Tensor table = at::empty({S, half, 2}, inv_freq.options().dtype(at::kFloat));
    if (S == 0 || half == 0) return table;
    if (S * half > INT32_MAX) fail(Status::kInternal, "rope_table: too many positions");
    const c10::cuda::CUDAGuard guard(inv_freq.device());
    const int threads = 256;
    const int blocks = static_cast<int>((S * half + threads - 1) / threads);
    auto stream = at::cuda::getCurrentCUDAStream();
    CN_DISPATCH_FLOAT_TYPES(dtype, "rope_table", [&] {
        rope_table_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
            inv_freq.const_data_ptr<float>(), reinterpret_cast<float2*>(table.data_ptr()), static_cast<int>(S), static_cast<int>(half));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return table;
}

}  // namespace cn::kernels
