// CUDA path of rms_norm / add_rms_norm: one block per row, 16-byte vector loads and stores when the row
// length and the pointers allow it (scalar otherwise), a fixed-order block reduction in fp32.
#include "kernels/rms_norm.h"

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

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
    T v[V];
};

template <class T, int V>
__global__ void rms_norm_kernel(const T* x, const T* __restrict__ delta, T* h_out, const T* __restrict__ w,  // h_out may alias x
                                T* __restrict__ out, int64_t D, float eps) {
    cuda::pdl_trigger();
    cuda::pdl_wait();  // every tensor but the weight belongs to earlier kernels
    using VT = Vec<T, V>;
    const int64_t row = blockIdx.x;
    const int64_t nv = D / V;
    const VT* xr = reinterpret_cast<const VT*>(x + row * D);
    const VT* dr = delta ? reinterpret_cast<const VT*>(delta + row * D) : nullptr;
    VT* hr = h_out ? reinterpret_cast<VT*>(h_out + row * D) : nullptr;
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        VT a = xr[i];
        if (dr) {
            const VT d = dr[i];
#pragma unroll
            for (int k = 0; k < V; ++k) a.v[k] = from_f<T>(to_f(a.v[k]) + to_f(d.v[k]));
            hr[i] = a;
        }
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const float f = to_f(a.v[k]);
            ss += f * f;
        }
    }
    const float inv = rsqrtf(block_sum(ss) / static_cast<float>(D) + eps);
    const VT* src = dr ? hr : xr;  // each thread re-reads only what it wrote itself
    const VT* wr = reinterpret_cast<const VT*>(w);
    VT* orow = reinterpret_cast<VT*>(out + row * D);
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        const VT a = src[i];
        const VT g = wr[i];
        VT o;
#pragma unroll
        for (int k = 0; k < V; ++k) o.v[k] = from_f<T>(to_f(g.v[k]) * round_to<T>(to_f(a.v[k]) * inv));
        orow[i] = o;
    }
}

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class T>
void launch(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& h_out, const at::Tensor& weight, double eps,
            const at::Tensor& out) {
    const int64_t D = x.size(-1);
    const int64_t rows = D ? x.numel() / D : 0;
    if (rows == 0) return;
    if (rows > INT32_MAX) fail(Status::kInvalidArgument, "rms_norm: too many rows for one launch");
    const T* xp = reinterpret_cast<const T*>(x.const_data_ptr());
    const T* dp = delta.defined() ? reinterpret_cast<const T*>(delta.const_data_ptr()) : nullptr;
    T* hp = h_out.defined() ? reinterpret_cast<T*>(h_out.data_ptr()) : nullptr;
    const T* wp = reinterpret_cast<const T*>(weight.const_data_ptr());
    T* op = reinterpret_cast<T*>(out.data_ptr());
    constexpr int V = 16 / sizeof(T);
    const bool vec = D % V == 0 && aligned16(xp) && aligned16(dp) && aligned16(hp) && aligned16(wp) && aligned16(op);
    const int64_t per_row = vec ? D / V : D;
    const int threads = static_cast<int>(std::min<int64_t>(256, std::max<int64_t>(32, (per_row + 31) / 32 * 32)));
    auto stream = at::cuda::getCurrentCUDAStream();
    cuda::launch_pdl(vec ? rms_norm_kernel<T, V> : rms_norm_kernel<T, 1>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream, xp,
                     dp, hp, wp, op, D, static_cast<float>(eps));
}

}  // namespace

void rms_norm_cuda(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& h_out, const at::Tensor& weight, double eps,
                   const at::Tensor& out) {
    if (delta.defined() && !h_out.defined()) fail(Status::kInternal, "rms_norm_cuda: a delta needs h_out for the sum");
    c10::cuda::CUDAGuard guard(x.device());
    CN_DISPATCH_FLOAT_TYPES(x.scalar_type(), "rms_norm", [&] { launch<scalar_t>(x, delta, h_out, weight, eps, out); });
}

}  // namespace cn::kernels
