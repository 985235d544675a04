// rows_gemm's own small-call kernel (kernels/rows_gemm_mma.h): a block of kWarps warps owns 8 kWarps output columns
// for every row. Its weight rows (8 kWarps x K) are copied to shared memory with cp.async before the
// programmatic-dependent-launch wait (weights are never written by an earlier kernel), so that copy overlaps the
// previous kernel; x is read after the wait, from global memory (L2) into registers AHEAD mma steps ahead.
#include "kernels/rows_gemm_mma.h"

#include <string>

#include "kernels/cuda_util.cuh"
#include "kernels/mma.cuh"

namespace cn::kernels::rows_gemm_detail {
namespace {

using cuda::cp_async16;
using cuda::from_f;
using cuda::mma16816;
using cuda::pack2;
using cuda::to_f;

constexpr int kWarps = 2;          // warps per block; each owns 8 columns
constexpr int kCols = 8 * kWarps;  // columns per block
constexpr int kPadBytes = 16;      // per weight row in shared memory: rows 8 apart start 4 banks apart

__device__ __forceinline__ uint32_t ld_x(const uint32_t* p, bool in) { return in ? __ldg(p) : 0u; }

// MT tiles of 16 rows; AHEAD mma steps of x in flight per warp.
template <class T, int MT, int AHEAD, bool BIAS, bool RELU, MmaAdd ADD>
__global__ void __launch_bounds__(kWarps * 32) mma_rows_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                                               T* __restrict__ out, int M, int N, int K) {
    extern __shared__ __align__(16) unsigned char smem[];
    cuda::pdl_trigger();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int col0 = blockIdx.x * kCols;
    const int row_bytes = K * 2 + kPadBytes;

    // The block's weight rows, straight to shared memory (16-byte chunks; rows past N are not read).
    {
        const int chunks_per_row = K / 8, chunks = kCols * chunks_per_row;
        for (int c = threadIdx.x; c < chunks; c += kWarps * 32) {
            const int r = c / chunks_per_row, k8 = c - r * chunks_per_row;
            if (col0 + r < N) cp_async16(smem + r * row_bytes + k8 * 16, w + static_cast<int64_t>(col0 + r) * K + k8 * 8);
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    cuda::pdl_wait();  // x and out are the previous kernels' to finish

    const int steps = K / 16;
    const uint32_t* xr[MT][2];
    bool in[MT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = i * 16 + g + 8 * h;
            in[i][h] = r < M;
            xr[i][h] = reinterpret_cast<const uint32_t*>(x + static_cast<int64_t>(in[i][h] ? r : 0) * K + 2 * t);
        }
    }
    uint32_t a[AHEAD][MT][4];
    auto load_a = [&](uint32_t(&f)[MT][4], int s) {
        const int k = s * 8;  // in 32-bit words
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            f[i][0] = ld_x(xr[i][0] + k, in[i][0]);
            f[i][1] = ld_x(xr[i][1] + k, in[i][1]);
            f[i][2] = ld_x(xr[i][0] + k + 4, in[i][0]);
            f[i][3] = ld_x(xr[i][1] + k + 4, in[i][1]);
        }
    };
#pragma unroll
    for (int s = 0; s < AHEAD; ++s) {
        if (s < steps) load_a(a[s], s);
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();

    const unsigned char* wrow = smem + (warp * 8 + g) * row_bytes + t * 4;
    float acc[MT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    for (int base = 0; base < steps; base += AHEAD) {
#pragma unroll
        for (int s = 0; s < AHEAD; ++s) {
            const int step = base + s;
            if (step < steps) {
                const uint32_t b0 = *reinterpret_cast<const uint32_t*>(wrow + step * 32);
                const uint32_t b1 = *reinterpret_cast<const uint32_t*>(wrow + step * 32 + 16);
#pragma unroll
                for (int i = 0; i < MT; ++i) mma16816<T>(acc[i], a[s][i], b0, b1);
                if (step + AHEAD < steps) load_a(a[s], step + AHEAD);
            }
        }
    }

    // Epilogue: columns 2t, 2t + 1 of the warp's 8, rows g and g + 8 of each tile.
    const int col = col0 + warp * 8 + 2 * t;
    if (col >= N) return;
    float b0 = 0.0f, b1 = 0.0f;
    if constexpr (BIAS) b0 = to_f(bias[col]), b1 = to_f(bias[col + 1]);
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (!in[i][h]) continue;
            const int r = i * 16 + g + 8 * h;
            float v0 = acc[i][2 * h], v1 = acc[i][2 * h + 1];
            if constexpr (BIAS) v0 += b0, v1 += b1;
            if constexpr (RELU) v0 = v0 > 0.0f ? v0 : 0.0f, v1 = v1 > 0.0f ? v1 : 0.0f;
            uint32_t* o = reinterpret_cast<uint32_t*>(out + static_cast<int64_t>(r) * N + col);
            if constexpr (ADD != MmaAdd::kNone) {
                const uint32_t prev = *o;
                const T p0 = *reinterpret_cast<const T*>(&prev), p1 = *(reinterpret_cast<const T*>(&prev) + 1);
                v0 = to_f(from_f<T>(v0)) + to_f(p0), v1 = to_f(from_f<T>(v1)) + to_f(p1);
            }
            *o = pack2<T>(v0, v1);
        }
    }
}

template <class T, int MT, bool BIAS, bool RELU, MmaAdd ADD>
void launch(const void* x, const void* w, const void* bias, void* out, int M, int N, int K, cudaStream_t stream) {
    constexpr int ahead = MT <= 3 ? 8 : 4;
    auto kernel = mma_rows_kernel<T, MT, ahead, BIAS, RELU, ADD>;
    const size_t smem = static_cast<size_t>(kCols) * (static_cast<size_t>(K) * 2 + kPadBytes);
    if (smem > 48 * 1024) {
        const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        if (e != cudaSuccess) ::cn::fail(::cn::Status::kInternal, std::string("rows_gemm_mma: ") + cudaGetErrorString(e));
    }
    const dim3 grid((N + kCols - 1) / kCols);
    cuda::launch_pdl(kernel, grid, dim3(kWarps * 32), smem, stream, static_cast<const T*>(x), static_cast<const T*>(w),
                     static_cast<const T*>(bias), static_cast<T*>(out), M, N, K);
}

template <class T, int MT>
void dispatch_epilogue(const void* x, const void* w, const void* bias, void* out, int M, int N, int K, bool relu, MmaAdd add,
                       cudaStream_t s) {
    if (add == MmaAdd::kAddRounded) return launch<T, MT, false, false, MmaAdd::kAddRounded>(x, w, bias, out, M, N, K, s);
    if (bias) {
        return relu ? launch<T, MT, true, true, MmaAdd::kNone>(x, w, bias, out, M, N, K, s)
                    : launch<T, MT, true, false, MmaAdd::kNone>(x, w, bias, out, M, N, K, s);
    }
    return relu ? launch<T, MT, false, true, MmaAdd::kNone>(x, w, bias, out, M, N, K, s)
                : launch<T, MT, false, false, MmaAdd::kNone>(x, w, bias, out, M, N, K, s);
}

template <class T>
void dispatch_rows(const void* x, const void* w, const void* bias, void* out, int M, int N, int K, bool relu, MmaAdd add, cudaStream_t s) {
    switch ((M + 15) / 16) {
        case 1: return dispatch_epilogue<T, 1>(x, w, bias, out, M, N, K, relu, add, s);
        case 2: return dispatch_epilogue<T, 2>(x, w, bias, out, M, N, K, relu, add, s);
        case 3: return dispatch_epilogue<T, 3>(x, w, bias, out, M, N, K, relu, add, s);
        case 4: return dispatch_epilogue<T, 4>(x, w, bias, out, M, N, K, relu, add, s);
        default: return dispatch_epilogue<T, 5>(x, w, bias, out, M, N, K, relu, add, s);
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool mma_takes(c10::ScalarType dt, int64_t M, int64_t N, int64_t K, const void* x, const void* w, const void* out) {
    // K up to 6144: the block's weight rows (16 x K x 2 bytes) fit in shared memory.
    return (dt == c10::kBFloat16 || dt == c10::kHalf) && M >= 1 && M <= kMmaMaxRows && N >= 8 && N % 8 == 0 && K >= 16 && K % 16 == 0 &&
           K <= 6144 && N < (int64_t{1} << 30) && aligned16(x) && aligned16(w) && aligned16(out);
}

void mma_gemm(c10::ScalarType dt, const void* x, const void* w, const void* bias, void* out, int64_t M, int64_t N, int64_t K, bool relu,
              MmaAdd add, cudaStream_t stream) {
    if (!mma_takes(dt, M, N, K, x, w, out)) ::cn::fail(::cn::Status::kInternal, "rows_gemm_mma: operands it does not take");
    const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
    if (dt == c10::kBFloat16) return dispatch_rows<__nv_bfloat16>(x, w, bias, out, m, n, k, relu, add, stream);
    return dispatch_rows<__half>(x, w, bias, out, m, n, k, relu, add, stream);
}

}  // namespace cn::kernels::rows_gemm_detail
