// CUDA path of rms_norm_scale / add_gated_rms_norm: one block per row (32 W threads, W = min(8, ceil(D / V / 32))),
// 16-byte vectors when D and the pointers allow it, the sum of squares in each thread's order then block_sum's.
#include "kernels/modulated_norm.h"

#include <algorithm>
#include <cstdint>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {
namespace {

using cuda::block_sum;
using cuda::from_f;
using cuda::round_to;
using cuda::to_f;
using cuda::Vec;

// out = n(y) [* mul[item]] [+ residual]; residual may alias out (each thread reads then writes its own vectors).
template <class T, int V>
__global__ void modulated_norm_kernel(const T* __restrict__ y, const T* __restrict__ w, const T* __restrict__ mul, const T* residual,
                                      T* out, int64_t S, int64_t D, float eps) {
    cuda::pdl_trigger();
    cuda::pdl_wait();
    using VT = Vec<T, V>;
    const int64_t row = blockIdx.x, item = row / S, nv = D / V;
    const VT* yr = reinterpret_cast<const VT*>(y + row * D);
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        const VT a = yr[i];
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const float f = to_f(a.v[k]);
            ss += f * f;
        }
    }
    const float inv = rsqrtf(block_sum(ss) / static_cast<float>(D) + eps);
    const VT* wr = reinterpret_cast<const VT*>(w);
    const VT* mr = mul ? reinterpret_cast<const VT*>(mul + item * D) : nullptr;
    const VT* rr = residual ? reinterpret_cast<const VT*>(residual + row * D) : nullptr;
    VT* orow = reinterpret_cast<VT*>(out + row * D);
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        const VT a = yr[i], g = wr[i];
        VT m, r, o;
        if (mr) m = mr[i];
        if (rr) r = rr[i];
#pragma unroll
        for (int k = 0; k < V; ++k) {
            float n = round_to<T>(to_f(g.v[k]) * round_to<T>(to_f(a.v[k]) * inv));
            if (mr) n = round_to<T>(n * to_f(m.v[k]));
            if (rr) n = to_f(r.v[k]) + n;
            o.v[k] = from_f<T>(n);
        }
        orow[i] = o;
    }
}

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class T>
void launch(const at::Tensor& y, const at::Tensor& weight, double eps, const at::Tensor& mul, const at::Tensor& residual,
            const at::Tensor& out) {
    const int64_t S = y.size(1), D = y.size(2), rows = y.size(0) * S;
    if (rows == 0 || D == 0) return;
    if (rows > INT32_MAX) fail(Status::kInvalidArgument, "modulated_norm: too many rows for one launch");
    const T* yp = reinterpret_cast<const T*>(y.const_data_ptr());
    const T* wp = reinterpret_cast<const T*>(weight.const_data_ptr());
    const T* mp = mul.defined() ? reinterpret_cast<const T*>(mul.const_data_ptr()) : nullptr;
    const T* rp = residual.defined() ? reinterpret_cast<const T*>(residual.const_data_ptr()) : nullptr;
    T* op = reinterpret_cast<T*>(out.data_ptr());
    constexpr int V = 16 / sizeof(T);
    const bool vec = D % V == 0 && aligned16(yp) && aligned16(wp) && aligned16(mp) && aligned16(rp) && aligned16(op);
    const int64_t per_row = vec ? D / V : D;
    const int warps = static_cast<int>(std::min<int64_t>(8, std::max<int64_t>(1, (per_row + 31) / 32)));
    auto stream = at::cuda::getCurrentCUDAStream();
    cuda::launch_pdl(vec ? modulated_norm_kernel<T, V> : modulated_norm_kernel<T, 1>, dim3(static_cast<unsigned>(rows)), dim3(32 * warps),
                     0, stream, yp, wp, mp, rp, op, S, D, static_cast<float>(eps));
}

}  // namespace

void modulated_norm_cuda(const at::Tensor& y, const at::Tensor& weight, double eps, const at::Tensor& mul, const at::Tensor& residual,
                         const at::Tensor& out) {
    c10::cuda::CUDAGuard guard(y.device());
    const at::Tensor w = weight.contiguous();
    CN_DISPATCH_FLOAT_TYPES(y.scalar_type(), "modulated_norm", [&] { launch<scalar_t>(y, w, eps, mul, residual, out); });
}

}  // namespace cn::kernels
