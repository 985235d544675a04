// CUDA path of rms_norm / add_rms_norm: 16-byte vector loads and stores when the row length and the pointers allow it
// (scalar otherwise), and an fp32 sum whose order is fixed by D alone: that of one block of W = min(8, max(1,
// ceil(D / V / 32))) warps per row (each thread t of 32 W summing the vectors t, t + 32 W, ... in turn; each warp's
// butterfly over its 32 threads; the W warp sums in a butterfly of their own, kernels/cuda_util.cuh's block_sum).
// Calls of fewer than kWarpRowsMin rows run exactly that, one block per row; larger calls one warp per row (four rows
// per block), each lane holding the sums of the W threads whose work it does: the same bits, in fewer blocks.
#include "kernels/rms_norm.h"

#include <cstdint>
#include <type_traits>

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

constexpr int kMaxWarpsPerRow = 8;  // the block reduction's warps at most (256 threads)
constexpr int kRowsPerBlock = 4;    // the warp kernel's
// The fewest rows for the warp kernel. H100, bf16 D=768 alone (cn_bench_kernels): the block kernel 1.9 / 2.5 us at 34 /
// 1088 rows, the warp kernel 1.9 / 3.5 (add + norm 2.0 / 2.6 against 2.6 / 4.4); in fused bf16 at B=1024 (8704-row
// passes beside the other lane's GEMMs) the warp kernel made the call 3 % faster, at B=4-16 the block kernel 3-5 %.
constexpr int64_t kWarpRowsMin = 4096;

// Both kernels' last step: the normalized, weighted output of a row's vectors begin, begin + step, ... (each read back
// by the thread that wrote it, where the residual add wrote the row).
template <class T, int V>
__device__ __forceinline__ void write_normalized(const Vec<T, V>* src, const Vec<T, V>* wr, Vec<T, V>* orow, float inv, int64_t begin,
                                                 int64_t step, int64_t nv) {
    for (int64_t i = begin; i < nv; i += step) {
        const Vec<T, V> a = src[i];
        const Vec<T, V> g = wr[i];
        Vec<T, V> o;
#pragma unroll
        for (int j = 0; j < V; ++j) o.v[j] = from_f<T>(to_f(g.v[j]) * round_to<T>(to_f(a.v[j]) * inv));
        orow[i] = o;
    }
}

// One warp per row (calls of kWarpRowsMin rows or more); W: the block's warps per row whose order this kernel keeps
// (1 to kMaxWarpsPerRow).
template <class T, int V, int W>
__global__ void rms_norm_warp_kernel(const T* x, const T* __restrict__ delta, T* h_out, const T* __restrict__ w,  // h_out may alias x
                                     T* __restrict__ out, int64_t rows, int64_t D, float eps) {
    cuda::pdl_trigger();
    cuda::pdl_wait();  // every tensor but the weight belongs to earlier kernels
    using VT = Vec<T, V>;
    const int lane = threadIdx.x % 32;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;  // whole warps: no shuffle below misses a lane
    const int64_t nv = D / V, stride = 32 * static_cast<int64_t>(W);
    const VT* xr = reinterpret_cast<const VT*>(x + row * D);
    const VT* dr = delta ? reinterpret_cast<const VT*>(delta + row * D) : nullptr;
    VT* hr = h_out ? reinterpret_cast<VT*>(h_out + row * D) : nullptr;
    // Lane `lane` does the work of the block's threads lane + 32 k, k < W: their sums of squares first, each over its
    // vectors in order; the W vectors of one step are loaded before any is used (or written back).
    float ss[W];
#pragma unroll
    for (int k = 0; k < W; ++k) ss[k] = 0.f;
    for (int64_t base = lane; base < nv; base += stride) {
        VT a[W];
#pragma unroll
        for (int k = 0; k < W; ++k) {
            if (base + 32 * k < nv) a[k] = xr[base + 32 * k];
        }
        if (dr) {
#pragma unroll
            for (int k = 0; k < W; ++k) {
                if (base + 32 * k < nv) {
                    const VT d = dr[base + 32 * k];
#pragma unroll
                    for (int j = 0; j < V; ++j) a[k].v[j] = from_f<T>(to_f(a[k].v[j]) + to_f(d.v[j]));
                }
            }
#pragma unroll
            for (int k = 0; k < W; ++k) {
                if (base + 32 * k < nv) hr[base + 32 * k] = a[k];
            }
        }
#pragma unroll
        for (int k = 0; k < W; ++k) {
            if (base + 32 * k < nv) {
#pragma unroll
                for (int j = 0; j < V; ++j) {
                    const float f = to_f(a[k].v[j]);
                    ss[k] += f * f;
                }
            }
        }
    }
    // Each of the block's warps reduced its threads' sums; its warp 0 then the W warp sums (lane k holds warp k's,
    // the other lanes zero).
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < W; ++k) {
        const float sum_k = cuda::warp_sum(ss[k]);
        if (lane == k) total = sum_k;
    }
    total = cuda::warp_sum(total);
    const float inv = rsqrtf(total / static_cast<float>(D) + eps);
    // Each lane re-reads only what it wrote itself.
    write_normalized(dr ? hr : xr, reinterpret_cast<const VT*>(w), reinterpret_cast<VT*>(out + row * D), inv, lane, 32, nv);
}

// One block of 32 W threads per row (calls of fewer than kWarpRowsMin rows).
template <class T, int V>
__global__ void rms_norm_block_kernel(const T* x, const T* __restrict__ delta, T* h_out, const T* __restrict__ w,  // h_out may alias x
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
    // Each thread re-reads only what it wrote itself.
    write_normalized(dr ? hr : xr, reinterpret_cast<const VT*>(w), reinterpret_cast<VT*>(out + row * D), inv, threadIdx.x, blockDim.x, nv);
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
    const int warps = static_cast<int>(std::min<int64_t>(kMaxWarpsPerRow, std::max<int64_t>(1, (per_row + 31) / 32)));
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    auto stream = at::cuda::getCurrentCUDAStream();
    if (rows < kWarpRowsMin) {
        cuda::launch_pdl(vec ? rms_norm_block_kernel<T, V> : rms_norm_block_kernel<T, 1>, dim3(static_cast<unsigned>(rows)),
                         dim3(32 * warps), 0, stream, xp, dp, hp, wp, op, D, static_cast<float>(eps));
        return;
    }
    auto go = [&](auto w_tag) {
        constexpr int W = decltype(w_tag)::value;
        cuda::launch_pdl(vec ? rms_norm_warp_kernel<T, V, W> : rms_norm_warp_kernel<T, 1, W>, dim3(static_cast<unsigned>(blocks)),
                         dim3(32 * kRowsPerBlock), 0, stream, xp, dp, hp, wp, op, rows, D, static_cast<float>(eps));
    };
    switch (warps) {
        case 1: return go(std::integral_constant<int, 1>{});
        case 2: return go(std::integral_constant<int, 2>{});
        case 3: return go(std::integral_constant<int, 3>{});
        case 4: return go(std::integral_constant<int, 4>{});
        case 5: return go(std::integral_constant<int, 5>{});
        case 6: return go(std::integral_constant<int, 6>{});
        case 7: return go(std::integral_constant<int, 7>{});
        default: return go(std::integral_constant<int, 8>{});
    }
}

}  // namespace

void rms_norm_cuda(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& h_out, const at::Tensor& weight, double eps,
                   const at::Tensor& out) {
    if (delta.defined() && !h_out.defined()) fail(Status::kInternal, "rms_norm_cuda: a delta needs h_out for the sum");
    c10::cuda::CUDAGuard guard(x.device());
    CN_DISPATCH_FLOAT_TYPES(x.scalar_type(), "rms_norm", [&] { launch<scalar_t>(x, delta, h_out, weight, eps, out); });
}

}  // namespace cn::kernels
