// rows_gemm's own small-call kernels (kernels/rows_gemm_mma.h): a block of ceil(M / 16) warps owns 8 NT output
// columns for every row, warp i the rows 16 i .. 16 i + 15. Shared memory: the block's weight rows [8 NT][K] (copied
// with cp.async by every thread before the programmatic-dependent-launch wait: weights are never written by an
// earlier kernel), then a ring of kStages stages of x [16 tiles][kChunk] (after the wait), each warp copying and
// reading its own 16 rows only, so past the weights the warps need no block barrier. Every row is padded by 16
// bytes, so the eight rows an ldmatrix reads start 4 banks apart (a row of 2 k + 16 bytes is 4 (2 j + 1) words for
// some j: eight rows cover all 32 banks once).
#include "kernels/rows_gemm_mma.h"

#include <array>
#include <atomic>
#include <string>

#include <cooperative_groups.h>

#include "kernels/cuda_util.cuh"
#include "kernels/mma.cuh"

namespace cn::kernels::rows_gemm_detail {
namespace {

using cuda::cp_async16;
using cuda::cp_async16_zfill;
using cuda::cp_async_commit;
using cuda::cp_async_wait_group;
using cuda::from_f;
using cuda::ldmatrix_x2;
using cuda::ldmatrix_x4;
using cuda::mma16816;
using cuda::pack2;
using cuda::to_f;

constexpr int kChunk = 256;    // k per x stage
constexpr int kStages = 3;     // x stages in flight (K <= 768: all of x at once)
constexpr int kPadBytes = 16;  // per shared-memory row
constexpr int kMaxWarps = static_cast<int>((kMmaMaxRows + 15) / 16);

// K: the block's own extent of k (K / split with a K split).
size_t smem_bytes(int cols, int64_t M, int64_t K) {
    const int64_t tiles = (M + 15) / 16, kc = K < kChunk ? K : kChunk;
    return static_cast<size_t>(cols * (2 * K + kPadBytes) + kStages * tiles * 16 * (2 * kc + kPadBytes));
}
// With a K split: each block's partial tile beside it, [tiles][cols / 8][32 lanes] float4, read by the cluster's rank 0.
size_t split_smem_bytes(int cols, int64_t M, int64_t K, int split) {
    return smem_bytes(cols, M, K / split) + static_cast<size_t>((M + 15) / 16 * (cols / 8) * 32 * 16);
}

// Fragments of one mma step: A (the warp's 16 rows x 16 k) and B (NT tiles of 8 weight rows x 16 k: b0, b1 of tile 0,
// then of tile 1, ...; pairs of tiles 16 weight rows apart).
template <int NT>
__device__ __forceinline__ void load_step(uint32_t (&a)[4], uint32_t (&b)[2 * NT], const unsigned char* xa, const unsigned char* wb,
                                          int w_row) {
    ldmatrix_x4(a, xa);
    if constexpr (NT == 1) {
        ldmatrix_x2(b[0], b[1], wb);
    } else {
#pragma unroll
        for (int j = 0; j < NT / 2; ++j) ldmatrix_x4(*reinterpret_cast<uint32_t(*)[4]>(b + 4 * j), wb + j * 16 * w_row);
    }
}

// The mma steps of one x stage: `steps` (<= kChunk / 16) steps in k order, each step's fragments loaded kAhead steps
// before its mma. FULL: steps == FULL, known at compile time (no predicates in the unrolled loop); 0: any count.
template <class T, int NT, int FULL>
__device__ __forceinline__ void chunk_steps(float (&acc)[NT][4], const unsigned char* xa, const unsigned char* wb, int w_row, int steps) {
    constexpr int kAhead = 2, kMax = kChunk / 16;
    uint32_t a[kAhead + 1][4], b[kAhead + 1][2 * NT];
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
        if (FULL || s < steps) load_step<NT>(a[s], b[s], xa + s * 32, wb + s * 32, w_row);
    }
#pragma unroll
    for (int s = 0; s < kMax; ++s) {
        if (FULL || s < steps) {
            if (FULL ? s + kAhead < FULL : s + kAhead < steps) {
                load_step<NT>(a[(s + kAhead) % (kAhead + 1)], b[(s + kAhead) % (kAhead + 1)], xa + (s + kAhead) * 32,
                              wb + (s + kAhead) * 32, w_row);
            }
#pragma unroll
            for (int n = 0; n < NT; ++n)
                mma16816<T>(acc[n], a[s % (kAhead + 1)], b[s % (kAhead + 1)][2 * n], b[s % (kAhead + 1)][2 * n + 1]);
        }
    }
}

// SPLIT > 1 (mma_gemm_ksplit, a measuring tool): the grid's y is the K split, a cluster of SPLIT blocks per column
// group; block y runs the chain over k = y K / SPLIT .. (y + 1) K / SPLIT - 1, and rank 0 adds the others' partial
// tiles to its own in rank order through distributed shared memory before the epilogue. SPLIT = 1: the candidates.
template <class T, int NT, bool BIAS, bool RELU, MmaAdd ADD, int SPLIT = 1>
__global__ void __launch_bounds__(kMaxWarps * 32) mma_rows_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                                  const T* __restrict__ bias, T* __restrict__ out, int M, int N, int K) {
    extern __shared__ __align__(16) unsigned char smem[];
    cuda::pdl_trigger();
    constexpr int kCols = 8 * NT;
    const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32;
    const int tiles = nthreads / 32;
    const int col0 = blockIdx.x * kCols;
    const int ks = K / SPLIT, kb = SPLIT > 1 ? static_cast<int>(blockIdx.y) * ks : 0;  // this block's k: kb .. kb + ks - 1
    const int w_row = ks * 2 + kPadBytes;
    const int x_row = (ks < kChunk ? ks : kChunk) * 2 + kPadBytes;
    unsigned char* const ws = smem;
    unsigned char* const xs = smem + kCols * w_row;
    const int x_stage = tiles * 16 * x_row;

    // The block's weight rows (rows past N as zeros), one commit group; each thread's copies are 16-byte chunks q, q +
    // nthreads, ... of every row (no division in the loop: its index math is most of the copy's instructions).
    {
        const int per_row = ks / 8;
        for (int r = 0; r < kCols; ++r) {
            const bool in = col0 + r < N;
            const T* const src = w + (in ? static_cast<int64_t>(col0 + r) * K + kb : 0);
            unsigned char* const dst = ws + r * w_row;
            for (int q = tid; q < per_row; q += nthreads) cp_async16_zfill(dst + q * 16, src + q * 8, in);
        }
        cp_async_commit();
    }
    // The warp's rows past M are zeros in every stage, written once (never copied to).
    const int row0 = warp * 16;
    for (int r = M > row0 ? M : row0; r < row0 + 16; ++r) {
        for (int q = lane; q < x_row / 16; q += 32) {
            for (int st = 0; st < kStages; ++st) *reinterpret_cast<uint4*>(xs + st * x_stage + r * x_row + q * 16) = make_uint4(0, 0, 0, 0);
        }
    }
    cuda::pdl_wait();  // x and out are the previous kernels' to finish

    // Each warp copies its own 16 rows of x (those below M), so after the weights no barrier but the warp's own: chunk c
    // into stage c % kStages, lane q copying the row's 16-byte chunk q (a chunk's row is at most 32 of them); one
    // commit group per chunk.
    const int chunks = (ks + kChunk - 1) / kChunk;
    const int row_end = M - row0 < 16 ? M - row0 : 16;  // >= 1: the block has ceil(M / 16) warps
    auto load_chunk = [&](int c) {
        const int k0 = c * kChunk, per_row = (ks - k0 < kChunk ? ks - k0 : kChunk) / 8;
        if (lane < per_row) {
            unsigned char* dst = xs + (c % kStages) * x_stage + row0 * x_row + lane * 16;
            const T* src = x + static_cast<int64_t>(row0) * K + kb + k0 + lane * 8;
            for (int r = 0; r < row_end; ++r, dst += x_row, src += K) cp_async16(dst, src);
        }
    };
#pragma unroll
    for (int c = 0; c < kStages; ++c) {
        if (c < chunks) load_chunk(c);
        cp_async_commit();
    }

    // ldmatrix row addresses. A: matrix m = lane / 8 is rows 8 (m % 2) .. + 7 of the warp's tile, k 8 (m / 2) .. + 7 (the
    // A fragment's registers in order). B: matrix m is weight rows 8 (m / 2) .. + 7 (n tile m / 2), k 8 (m % 2) .. + 7
    // (b0, b1 of each n tile; for NT = 4 a second such load 16 rows further); with NT = 1 lanes 0-15 give matrices 0 and 1.
    const int a_off = (row0 + lane % 8 + 8 * ((lane / 8) % 2)) * x_row + (lane / 16) * 16;
    const int b_off = (lane % 8 + 8 * ((lane / 16) % NT)) * w_row + ((lane / 8) % 2) * 16;
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    for (int c = 0; c < chunks; ++c) {
        cp_async_wait_group<kStages - 1>();  // chunk c (and the weights) landed, for this thread's copies
        if (c == 0) {
            __syncthreads();  // the weights, copied by every thread
        } else {
            __syncwarp();  // the warp's rows of chunk c
        }
        const unsigned char* const xa = xs + (c % kStages) * x_stage + a_off;
        const unsigned char* const wb = ws + b_off + c * kChunk * 2;
        const int steps = (ks - c * kChunk < kChunk ? ks - c * kChunk : kChunk) / 16;
        if (steps == kChunk / 16) {
            chunk_steps<T, NT, kChunk / 16>(acc, xa, wb, w_row, steps);
        } else {
            chunk_steps<T, NT, 0>(acc, xa, wb, w_row, steps);
        }
        __syncwarp();  // the warp is done with stage c % kStages
        if (c + kStages < chunks) load_chunk(c + kStages);
        cp_async_commit();
    }
    if constexpr (SPLIT > 1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
        __trap();  // clusters are sm_90's: mma_ksplit_takes refuses older devices
#else
        // The partial tiles, added by rank 0 in rank order: ((p0 + p1) + p2) + ... (every block reaches both syncs).
        cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
        float4* const red = reinterpret_cast<float4*>(xs + kStages * x_stage) + warp * NT * 32 + lane;
        const unsigned rank = cluster.block_rank();
        if (rank != 0) {
#pragma unroll
            for (int n = 0; n < NT; ++n) red[n * 32] = make_float4(acc[n][0], acc[n][1], acc[n][2], acc[n][3]);
        }
        cluster.sync();
        if (rank == 0) {
            for (int r = 1; r < SPLIT; ++r) {
                const float4* const other = cluster.map_shared_rank(red, r);
#pragma unroll
                for (int n = 0; n < NT; ++n) {
                    const float4 v = other[n * 32];
                    acc[n][0] += v.x, acc[n][1] += v.y, acc[n][2] += v.z, acc[n][3] += v.w;
                }
            }
        }
        cluster.sync();  // the others' tiles stay until rank 0 has read them
        if (rank != 0) return;
#endif
    }

    // Epilogue: columns 2t, 2t + 1 of each n tile, rows g and g + 8 of the warp's tile.
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
        const int col = col0 + 8 * n + 2 * t;
        if (col >= N) continue;
        float b0 = 0.0f, b1 = 0.0f;
        if constexpr (BIAS) b0 = to_f(bias[col]), b1 = to_f(bias[col + 1]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = warp * 16 + g + 8 * h;
            if (r >= M) continue;
            float v0 = acc[n][2 * h], v1 = acc[n][2 * h + 1];
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

template <class T, int NT, bool BIAS, bool RELU, MmaAdd ADD>
void launch(const void* x, const void* w, const void* bias, void* out, int M, int N, int K, cudaStream_t stream) {
    auto kernel = mma_rows_kernel<T, NT, BIAS, RELU, ADD>;
    const size_t smem = smem_bytes(8 * NT, M, K);
    if (smem > 48 * 1024) {
        const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        if (e != cudaSuccess) ::cn::fail(::cn::Status::kInternal, std::string("rows_gemm_mma: ") + cudaGetErrorString(e));
    }
    const dim3 grid((N + 8 * NT - 1) / (8 * NT));
    cuda::launch_pdl(kernel, grid, dim3(32 * ((M + 15) / 16)), smem, stream, static_cast<const T*>(x), static_cast<const T*>(w),
                     static_cast<const T*>(bias), static_cast<T*>(out), M, N, K);
}

// mma_gemm_ksplit's launch: a cluster of SPLIT blocks along y per column group, with programmatic dependent launch.
template <class T, int NT, MmaAdd ADD, int SPLIT>
void launch_split(const void* x, const void* w, void* out, int M, int N, int K, cudaStream_t stream) {
    auto kernel = mma_rows_kernel<T, NT, false, false, ADD, SPLIT>;
    const size_t smem = split_smem_bytes(8 * NT, M, K, SPLIT);
    if (smem > 48 * 1024) {
        const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        if (e != cudaSuccess) ::cn::fail(::cn::Status::kInternal, std::string("rows_gemm_mma (K split): ") + cudaGetErrorString(e));
    }
    cuda::launch_pdl_cluster(kernel, dim3((N + 8 * NT - 1) / (8 * NT), SPLIT), dim3(32 * ((M + 15) / 16)), dim3(1, SPLIT, 1), smem, stream,
                             static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(nullptr), static_cast<T*>(out), M, N,
                             K);
}

template <class T, int NT, MmaAdd ADD>
void dispatch_split(const void* x, const void* w, void* out, int M, int N, int K, int split, cudaStream_t s) {
    if (split == 2) return launch_split<T, NT, ADD, 2>(x, w, out, M, N, K, s);
    return launch_split<T, NT, ADD, 4>(x, w, out, M, N, K, s);
}

template <class T>
void dispatch_split_cols(const void* x, const void* w, void* out, int M, int N, int K, bool add, int cols, int split, cudaStream_t s) {
    if (add) {
        if (cols == 8) return dispatch_split<T, 1, MmaAdd::kAddRounded>(x, w, out, M, N, K, split, s);
        if (cols == 16) return dispatch_split<T, 2, MmaAdd::kAddRounded>(x, w, out, M, N, K, split, s);
        return dispatch_split<T, 4, MmaAdd::kAddRounded>(x, w, out, M, N, K, split, s);
    }
    if (cols == 8) return dispatch_split<T, 1, MmaAdd::kNone>(x, w, out, M, N, K, split, s);
    if (cols == 16) return dispatch_split<T, 2, MmaAdd::kNone>(x, w, out, M, N, K, split, s);
    return dispatch_split<T, 4, MmaAdd::kNone>(x, w, out, M, N, K, split, s);
}

template <class T, int NT>
void dispatch_epilogue(const void* x, const void* w, const void* bias, void* out, int M, int N, int K, bool relu, MmaAdd add,
                       cudaStream_t s) {
    if (add == MmaAdd::kAddRounded) return launch<T, NT, false, false, MmaAdd::kAddRounded>(x, w, bias, out, M, N, K, s);
    if (bias) {
        return relu ? launch<T, NT, true, true, MmaAdd::kNone>(x, w, bias, out, M, N, K, s)
                    : launch<T, NT, true, false, MmaAdd::kNone>(x, w, bias, out, M, N, K, s);
    }
    return relu ? launch<T, NT, false, true, MmaAdd::kNone>(x, w, bias, out, M, N, K, s)
                : launch<T, NT, false, false, MmaAdd::kNone>(x, w, bias, out, M, N, K, s);
}

template <class T>
void dispatch_cols(const void* x, const void* w, const void* bias, void* out, int M, int N, int K, bool relu, MmaAdd add, int cols,
                   cudaStream_t s) {
    if (cols == 8) return dispatch_epilogue<T, 1>(x, w, bias, out, M, N, K, relu, add, s);
    if (cols == 16) return dispatch_epilogue<T, 2>(x, w, bias, out, M, N, K, relu, add, s);
    return dispatch_epilogue<T, 4>(x, w, bias, out, M, N, K, relu, add, s);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The current device's opt-in shared memory per block (cached per device).
size_t max_smem() {
    static std::array<std::atomic<int>, 64> cache{};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return 0;
    int v = cache[static_cast<size_t>(device)].load(std::memory_order_relaxed);
    if (v == 0) {
        if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) return 0;
        cache[static_cast<size_t>(device)].store(v, std::memory_order_relaxed);
    }
    return static_cast<size_t>(v);
}

}  // namespace

bool mma_takes(c10::ScalarType dt, int64_t M, int64_t N, int64_t K, int cols, const void* x, const void* w, const void* out) {
    return (cols == 8 || cols == 16 || cols == 32) && (dt == c10::kBFloat16 || dt == c10::kHalf) && M >= 1 && M <= kMmaMaxRows && N >= 8 &&
           N % 8 == 0 && N < (int64_t{1} << 30) && K >= 16 && K % 16 == 0 && K <= 65536 && smem_bytes(cols, M, K) <= max_smem() &&
           aligned16(x) && aligned16(w) && aligned16(out);
}

bool mma_ksplit_takes(c10::ScalarType dt, int64_t M, int64_t N, int64_t K, int cols, int split, const void* x, const void* w,
                      const void* out) {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        major < 9)
        return false;  // thread-block clusters
    return dt == c10::kBFloat16 && (split == 2 || split == 4) && K % (16 * split) == 0 && mma_takes(dt, M, N, K / split, cols, x, w, out) &&
           split_smem_bytes(cols, M, K, split) <= max_smem();
}

void mma_gemm_ksplit(c10::ScalarType dt, const void* x, const void* w, void* out, int64_t M, int64_t N, int64_t K, MmaAdd add, int cols,
                     int split, cudaStream_t stream) {
    if (!mma_ksplit_takes(dt, M, N, K, cols, split, x, w, out))
        ::cn::fail(::cn::Status::kInternal, "rows_gemm_mma (K split): operands it does not take");
    const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
    dispatch_split_cols<__nv_bfloat16>(x, w, out, m, n, k, add == MmaAdd::kAddRounded, cols, split, stream);
}

void mma_gemm(c10::ScalarType dt, const void* x, const void* w, const void* bias, void* out, int64_t M, int64_t N, int64_t K, bool relu,
              MmaAdd add, int cols, cudaStream_t stream) {
    if (!mma_takes(dt, M, N, K, cols, x, w, out)) ::cn::fail(::cn::Status::kInternal, "rows_gemm_mma: operands it does not take");
    const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
    if (dt == c10::kBFloat16) return dispatch_cols<__nv_bfloat16>(x, w, bias, out, m, n, k, relu, add, cols, stream);
    return dispatch_cols<__half>(x, w, bias, out, m, n, k, relu, add, cols, stream);
}

}  // namespace cn::kernels::rows_gemm_detail
