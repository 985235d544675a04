// CUDA paths of kernels/kronos_embed.h: one thread per output element.
#include "kernels/kronos_embed.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {

void check_token_embed(const at::Tensor& h1, const at::Tensor& h2, const at::Tensor& pos, const at::Tensor& e1, const at::Tensor& e2);
void check_add_time(const at::Tensor& x, const at::Tensor& stamps, const at::Tensor& pos, const KronosTimeTables& t);

namespace {

using cuda::from_f;
using cuda::to_f;

__device__ __forceinline__ int64_t clamp_index(int64_t i, int64_t rows) { return i < 0 ? 0 : (i >= rows ? rows - 1 : i); }

template <class T>
__global__ void token_embed_kernel(const int64_t* __restrict__ h1, const int64_t* __restrict__ h2, int64_t L,
                                   const int64_t* __restrict__ pos, const T* __restrict__ e1, int64_t V1, const T* __restrict__ e2,
                                   int64_t V2, int64_t d, float scale, T* __restrict__ out, int64_t total) {
    cuda::pdl_trigger();
    cuda::pdl_wait();  // the history, stamps, position and x belong to earlier kernels
    const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (t >= total) return;
    const int64_t n = t / (2 * d), c = t % (2 * d), p = clamp_index(*pos, L);
    const bool first = c < d;
    const int64_t tok = clamp_index(first ? h1[n * L + p] : h2[n * L + p], first ? V1 : V2);
    const T* table = first ? e1 : e2;
    out[t] = from_f<T>(to_f(table[tok * d + (first ? c : c - d)]) * scale);
}

struct TimeTables {
    const void* t[5];  // hour, weekday, day, month, minute: the order of the sum
    int64_t rows[5];
    int col[5];  // the stamp column of each
};

template <class T>
__global__ void add_time_kernel(T* __restrict__ x, const float* __restrict__ stamps, int64_t L, const int64_t* __restrict__ pos,
                                TimeTables tt, int64_t d, int64_t total) {
    cuda::pdl_trigger();
    cuda::pdl_wait();  // the history, stamps, position and x belong to earlier kernels
    const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (t >= total) return;
    const int64_t n = t / d, j = t % d, p = clamp_index(*pos, L);
    const float* s = stamps + (n * L + p) * 5;
    float te = 0.f;
    for (int k = 0; k < 5; ++k) {
        const int64_t i = clamp_index(static_cast<int64_t>(s[tt.col[k]]), tt.rows[k]);
        const float v = to_f(static_cast<const T*>(tt.t[k])[i * d + j]);
        te = k == 0 ? v : to_f(from_f<T>(te + v));
    }
    x[t] = from_f<T>(to_f(x[t]) + te);
}

}  // namespace

at::Tensor kronos_token_embed_cuda(const at::Tensor& hist1, const at::Tensor& hist2, const at::Tensor& pos, const at::Tensor& emb1,
                                   const at::Tensor& emb2, double scale) {
    check_token_embed(hist1, hist2, pos, emb1, emb2);
    c10::cuda::CUDAGuard guard(hist1.device());
    const int64_t N = hist1.size(0), d = emb1.size(1), total = N * 2 * d;
    at::Tensor out = at::empty({N, 2 * d}, emb1.options());
    if (total == 0) return out;
    const int threads = 256;
    const int64_t blocks = (total + threads - 1) / threads;
    if (blocks > INT32_MAX) fail(Status::kInvalidArgument, "kronos_token_embed: too large for one launch");
    CN_DISPATCH_FLOAT_TYPES(emb1.scalar_type(), "kronos_token_embed", [&] {
        cuda::launch_pdl(token_embed_kernel<scalar_t>, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0,
                         at::cuda::getCurrentCUDAStream(), hist1.const_data_ptr<int64_t>(), hist2.const_data_ptr<int64_t>(), hist1.size(1),
                         pos.const_data_ptr<int64_t>(), reinterpret_cast<const scalar_t*>(emb1.const_data_ptr()), emb1.size(0),
                         reinterpret_cast<const scalar_t*>(emb2.const_data_ptr()), emb2.size(0), d, static_cast<float>(scale),
                         reinterpret_cast<scalar_t*>(out.data_ptr()), total);
    });
    return out;
}

void kronos_add_time_cuda_(const at::Tensor& x, const at::Tensor& stamps, const at::Tensor& pos, const KronosTimeTables& t) {
    check_add_time(x, stamps, pos, t);
    c10::cuda::CUDAGuard guard(x.device());
    const int64_t total = x.numel();
    if (total == 0) return;
    TimeTables tt{};
    const at::Tensor* order[5] = {&t.hour, &t.weekday, &t.day, &t.month, &t.minute};
    const int cols[5] = {1, 2, 3, 4, 0};
    for (int k = 0; k < 5; ++k) {
        tt.t[k] = order[k]->const_data_ptr();
        tt.rows[k] = order[k]->size(0);
        tt.col[k] = cols[k];
    }
    const int threads = 256;
    const int64_t blocks = (total + threads - 1) / threads;
    if (blocks > INT32_MAX) fail(Status::kInvalidArgument, "kronos_add_time_: too large for one launch");
    CN_DISPATCH_FLOAT_TYPES(x.scalar_type(), "kronos_add_time_", [&] {
        cuda::launch_pdl(add_time_kernel<scalar_t>, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0, at::cuda::getCurrentCUDAStream(),
                         reinterpret_cast<scalar_t*>(x.data_ptr()), stamps.const_data_ptr<float>(), stamps.size(1),
                         pos.const_data_ptr<int64_t>(), tt, x.size(1), total);
    });
}

}  // namespace cn::kernels
