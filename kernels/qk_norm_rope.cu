// CUDA path of qk_norm_rope: one warp per (row, q, k or v, head) (v: a copy into the [B, H, S, hd] layout); lane l takes the pairs l, l + 32, ... of the head's
// hd / 2 (x[2p], x[2p + 1] as one 2-element load), sums their squares in that order, warp_sum's butterfly, then
// writes the normed, rotated pairs into the [B, H, S, hd] outputs.
#include "kernels/qk_norm_rope.h"

#include <cstdint>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {
namespace {

using cuda::from_f;
using cuda::round_to;
using cuda::to_f;

constexpr int kWarpsPerBlock = 4;

template <class T>
using Pair = cuda::Vec<T, 2>;  // (x[2p], x[2p + 1])

template <class T>
__global__ void qk_norm_rope_kernel(const T* __restrict__ qkv, const T* __restrict__ qw, const T* __restrict__ kw,
                                    const float2* __restrict__ freqs, T* __restrict__ q_out, T* __restrict__ k_out, T* __restrict__ v_out,
                                    int64_t S, int64_t H, int64_t hd, int64_t units, float eps) {
    cuda::pdl_trigger();
    cuda::pdl_wait();
    const int64_t unit = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (unit >= units) return;  // whole warps
    const int lane = threadIdx.x % 32;
    // unit = (row * 3 + part) * H + head
    const int64_t head = unit % H, part = (unit / H) % 3, row = unit / (3 * H);
    const int64_t b = row / S, s = row % S, D = H * hd, half = hd / 2;
    const T* x = qkv + row * 3 * D + part * D + head * hd;
    T* out = (part == 0 ? q_out : part == 1 ? k_out : v_out) + ((b * H + head) * S + s) * hd;
    const Pair<T>* xp = reinterpret_cast<const Pair<T>*>(x);
    if (part == 2) {
        Pair<T>* op = reinterpret_cast<Pair<T>*>(out);
        for (int64_t p = lane; p < half; p += 32) op[p] = xp[p];
        return;
    }
    const T* w = part == 0 ? qw : kw;
    const float2* f = freqs + row * half;
    float inv = 1.f;
    if (w) {
        float ss = 0.f;
        for (int64_t p = lane; p < half; p += 32) {
            const Pair<T> v = xp[p];
            const float a = to_f(v.v[0]), c = to_f(v.v[1]);
            ss += a * a;
            ss += c * c;
        }
        inv = rsqrtf(cuda::warp_sum(ss) / static_cast<float>(hd) + eps);
    }
    Pair<T>* op = reinterpret_cast<Pair<T>*>(out);
    for (int64_t p = lane; p < half; p += 32) {
        const Pair<T> v = xp[p];
        float n0 = to_f(v.v[0]), n1 = to_f(v.v[1]);
        if (w) {
            n0 = round_to<T>(to_f(w[2 * p]) * round_to<T>(n0 * inv));
            n1 = round_to<T>(to_f(w[2 * p + 1]) * round_to<T>(n1 * inv));
        }
        const float2 c = f[p];
        Pair<T> o;
        o.v[0] = from_f<T>(n0 * c.x - n1 * c.y);
        o.v[1] = from_f<T>(n0 * c.y + n1 * c.x);
        op[p] = o;
    }
}

template <class T>
void launch(const at::Tensor& qkv, int64_t H, const at::Tensor& q_w, const at::Tensor& k_w, double eps, const at::Tensor& freqs,
            const at::Tensor& q_out, const at::Tensor& k_out, const at::Tensor& v_out) {
    const int64_t B = qkv.size(0), S = qkv.size(1), hd = qkv.size(2) / (3 * H);
    const int64_t units = B * S * 3 * H;
    if (units == 0) return;
    const int64_t blocks = (units + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (blocks > INT32_MAX) fail(Status::kInvalidArgument, "qk_norm_rope: too many rows for one launch");
    const T* qw = q_w.defined() ? reinterpret_cast<const T*>(q_w.const_data_ptr()) : nullptr;
    const T* kw = k_w.defined() ? reinterpret_cast<const T*>(k_w.const_data_ptr()) : nullptr;
    cuda::launch_pdl(qk_norm_rope_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(32 * kWarpsPerBlock), 0,
                     at::cuda::getCurrentCUDAStream(), reinterpret_cast<const T*>(qkv.const_data_ptr()), qw, kw,
                     reinterpret_cast<const float2*>(freqs.const_data_ptr()), reinterpret_cast<T*>(q_out.data_ptr()),
                     reinterpret_cast<T*>(k_out.data_ptr()), reinterpret_cast<T*>(v_out.data_ptr()), S, H, hd, units,
                     static_cast<float>(eps));
}

}  // namespace

void qk_norm_rope_cuda(const at::Tensor& qkv, int64_t heads, const at::Tensor& q_w, const at::Tensor& k_w, double eps,
                       const at::Tensor& freqs, const at::Tensor& q_out, const at::Tensor& k_out, const at::Tensor& v_out) {
    c10::cuda::CUDAGuard guard(qkv.device());
    const at::Tensor qw = q_w.defined() ? q_w.contiguous() : q_w, kw = k_w.defined() ? k_w.contiguous() : k_w;
    CN_DISPATCH_FLOAT_TYPES(qkv.scalar_type(), "qk_norm_rope",
                            [&] { launch<scalar_t>(qkv, heads, qw, kw, eps, freqs, q_out, k_out, v_out); });
}

}  // namespace cn::kernels
