// CUDA paths of kernels/sampling.h: one block per row for both (the top-p scan runs over contiguous chunks of
// the sorted row, one chunk per thread, then a block scan of the chunk sums).
#include "kernels/sampling.h"

#include <ATen/TensorOperators.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sort.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {

void check_top_p(const at::Tensor& logits);                                                                        // sampling.cpp
void check_draw(const at::Tensor& probs, const at::Tensor& noise, const at::Tensor& hist, const at::Tensor& pos);  // sampling.cpp

namespace {

constexpr int kTopPThreads = 1024;
constexpr int kDrawThreads = 256;
constexpr int64_t kMaxVocab = 65536;

// Exclusive prefix sum over the block in thread order.
__device__ __forceinline__ float block_exclusive_scan(float v) {
    __shared__ float warp_incl[32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
    float incl = v;
    for (int o = 1; o < 32; o <<= 1) {
        const float u = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += u;
    }
    float excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = 0.f;
    __syncthreads();
    if (lane == 31) warp_incl[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        float w = lane < warps ? warp_incl[lane] : 0.f;
        for (int o = 1; o < 32; o <<= 1) {
            const float u = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += u;
        }
        if (lane < warps) warp_incl[lane] = w;
    }
    __syncthreads();
    return (warp > 0 ? warp_incl[warp - 1] : 0.f) + excl;
}

__device__ __forceinline__ bool beats(float a, int64_t ia, float b, int64_t ib) {
    if (isnan(a)) return !isnan(b) || ia < ib;
    if (isnan(b)) return false;
    return a > b || (a == b && ia < ib);
}

// A running argmax of probs_i / noise_i in `beats` order (a strict total order on (value, index): the result
// does not depend on the order in which entries are considered).
struct Best {
    float v = -INFINITY;
    int64_t i = INT64_MAX;
    __device__ __forceinline__ void consider(float x, int64_t j) {
        if (i == INT64_MAX || beats(x, j, v, i)) v = x, i = j;
    }
};

// The block's argmax; valid in thread 0.
__device__ __forceinline__ int64_t block_argmax(Best b) {
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, b.v, o);
        const int64_t oi = __shfl_xor_sync(0xffffffffu, b.i, o);
        if (oi != INT64_MAX) b.consider(ov, oi);
    }
    __shared__ float wb[32];
    __shared__ int64_t wi[32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
    __syncthreads();  // wb / wi may still be read by a previous call
    if (lane == 0) wb[warp] = b.v, wi[warp] = b.i;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < warps; ++w) {
            if (wi[w] != INT64_MAX) b.consider(wb[w], wi[w]);
        }
    }
    return b.i;
}

// Thread 0 stores row r's token (and, with a history, writes it at column pos + 1).
__device__ __forceinline__ void store_token(int64_t r, int64_t t, int64_t* __restrict__ tok, int64_t* __restrict__ hist,
                                            int64_t hist_stride, int64_t hist_len, const int64_t* __restrict__ pos) {
    if (threadIdx.x != 0) return;
    tok[r] = t;
    if (hist) {
        const int64_t col = *pos + 1;  // outside the history: not written (the CPU path refuses it)
        if (col >= 0 && col < hist_len) hist[r * hist_stride + col] = t;
    }
}

// The top-p filter of one sorted row (sorted values / their indices, in global or shared memory) -> out row.
// With `noise` (the row's Exp(1) draws, in shared or global memory) it also returns this thread's candidate for
// the draw argmax_i out_i / noise_i among the entries it wrote.
template <class Idx>
__device__ Best top_p_row(const float* sorted, const Idx* idx, float* __restrict__ out, int64_t V, float top_p,
                          const float* noise = nullptr) {
    const float m = sorted[0];
    const int64_t chunk = (V + blockDim.x - 1) / blockDim.x;
    const int64_t b = threadIdx.x * chunk, e = b + chunk < V ? b + chunk : V;
    float local = 0.f;
    for (int64_t j = b; j < e; ++j) local += expf(sorted[j] - m);
    const float S = cuda::block_sum(local);
    float tot = 0.f;
    for (int64_t j = b; j < e; ++j) tot += expf(sorted[j] - m) / S;
    const float offset = block_exclusive_scan(tot);
    float kept = 0.f, run = offset;
    for (int64_t j = b; j < e; ++j) {
        const float x = expf(sorted[j] - m);
        if (j == 0 || !(run > top_p)) kept += x;
        run += x / S;
    }
    const float S2 = cuda::block_sum(kept);
    run = offset;
    Best best;
    for (int64_t j = b; j < e; ++j) {
        const float x = expf(sorted[j] - m);
        const float pr = (j == 0 || !(run > top_p)) ? x / S2 : 0.f;
        out[idx[j]] = pr;
        if (noise) best.consider(pr / noise[idx[j]], idx[j]);
        run += x / S;
    }
    return best;
}

__global__ void top_p_kernel(const float* __restrict__ sorted, const int64_t* __restrict__ idx, float* __restrict__ out, int64_t V,
                             float top_p) {
    const int64_t r = blockIdx.x;
    top_p_row(sorted + r * V, idx + r * V, out + r * V, V, top_p);
}

constexpr int kMaxFusedVocab = 4096;

// The sort's order as one 64-bit unsigned key, smaller first: larger value first, NaN before everything (as
// ATen's descending sort puts it), -0 equal to +0, equal values (and NaNs) in index order. One integer compare
// per exchange instead of a float comparison with its NaN and tie cases.
__device__ __forceinline__ unsigned long long sort_key(float x, int i) {
    unsigned int k = 0u;  // NaN
    if (!isnan(x)) {
        const unsigned int b = __float_as_uint(x == 0.f ? 0.f : x);
        k = ~((b & 0x80000000u) ? ~b : (b | 0x80000000u));  // the bits' ascending order of x, reversed (never 0)
    }
    return (static_cast<unsigned long long>(k) << 32) | static_cast<unsigned int>(i);
}
__device__ __forceinline__ float key_value(unsigned long long c) {
    const unsigned int k = static_cast<unsigned int>(c >> 32);
    if (k == 0u) return NAN;
    const unsigned int a = ~k;
    return __uint_as_float((a & 0x80000000u) ? (a & 0x7fffffffu) : ~a);
}
__device__ __forceinline__ int key_index(unsigned long long c) { return static_cast<int>(static_cast<unsigned int>(c)); }

// A bitonic compare-exchange at position `pos` with `partner_pos`: within a block of the network sorted "up" the
// lower position keeps the smaller key.
__device__ __forceinline__ void exchange(unsigned long long& c, unsigned long long pc, int pos, int partner_pos, bool up) {
    c = ((pos < partner_pos) == up) ? (c < pc ? c : pc) : (c < pc ? pc : c);
}

// Row r's draw argmax_i probs_i / noise_i by the whole block (any size up to 1024); thread 0 writes the token.
__device__ void draw_row(const float* probs, const float* __restrict__ noise, int64_t V, int64_t r, int64_t* __restrict__ tok,
                         int64_t* __restrict__ hist, int64_t hist_stride, int64_t hist_len, const int64_t* __restrict__ pos) {
    Best b;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) b.consider(probs[i] / noise[i], i);
    store_token(r, block_argmax(b), tok, hist, hist_stride, hist_len, pos);
}

__global__ void draw_kernel(const float* __restrict__ probs, const float* __restrict__ noise, int64_t V, int64_t* __restrict__ tok,
                            int64_t* __restrict__ hist, int64_t hist_stride, int64_t hist_len, const int64_t* __restrict__ pos) {
    const int64_t r = blockIdx.x;
    draw_row(probs + r * V, noise + r * V, V, r, tok, hist, hist_stride, hist_len, pos);
}

struct Draw {  // top_p_fused_kernel's optional draw from its own probabilities (top_p_draw)
    const float* noise = nullptr;
    int64_t* tok = nullptr;
    int64_t* hist = nullptr;
    int64_t hist_stride = 0, hist_len = 0;
    const int64_t* pos = nullptr;
};

// Sorts the row (bitonic, padded to a power of two P2 >= the block with -inf after every real entry), then
// filters it: one launch instead of at::sort's copies and radix sort plus the filter. Element e = t + r * 1024
// lives in register r of thread t: strides below 32 are warp shuffles, strides of 1024 and more swap
// registers, the others go through shared memory (two barriers each).
// With a draw (dr.tok set) the block then draws the row's token from the probabilities it wrote.
template <int R>
__global__ void __launch_bounds__(kTopPThreads)
    top_p_fused_kernel(const float* __restrict__ logits, float* __restrict__ out, int64_t V, float top_p, Draw dr) {
    constexpr int P2 = R * kTopPThreads;
    // The exchange buffer of the sort; after it, the sorted values (first half of its bytes) and their indices.
    __shared__ unsigned long long comp_s[P2];
    float* key_s = reinterpret_cast<float*>(comp_s);
    int* id_s = reinterpret_cast<int*>(comp_s + P2 / 2);
    // With a draw, the row's noise is staged in shared memory while the row sorts (up to 2048 entries; beyond,
    // the filter reads it from global memory).
    constexpr bool kStage = R <= 2;
    __shared__ float noise_s[kStage ? P2 : 1];
    cuda::pdl_trigger();
    cuda::pdl_wait();  // the logits, noise and outputs belong to earlier kernels
    const int64_t r = blockIdx.x;
    const int t = threadIdx.x;
    unsigned long long c[R];
#pragma unroll
    for (int q = 0; q < R; ++q) {
        const int e = t + q * kTopPThreads;
        c[q] = sort_key(e < V ? logits[r * V + e] : -INFINITY, e);
        if (kStage && dr.tok && e < V) noise_s[e] = dr.noise[r * V + e];
    }
    for (int k = 2; k <= P2; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            if (j >= kTopPThreads) {
                const int qj = j / kTopPThreads;
#pragma unroll
                for (int q = 0; q < R; ++q) {
                    const int qp = q ^ qj;
                    if (qp > q) {
                        const int e = t + q * kTopPThreads, ep = t + qp * kTopPThreads;
                        const unsigned long long c0 = c[q], c1 = c[qp];
                        exchange(c[q], c1, e, ep, (e & k) == 0);
                        exchange(c[qp], c0, ep, e, (ep & k) == 0);
                    }
                }
            } else if (j >= 32) {
#pragma unroll
                for (int q = 0; q < R; ++q) comp_s[t + q * kTopPThreads] = c[q];
                __syncthreads();
#pragma unroll
                for (int q = 0; q < R; ++q) {
                    const int e = t + q * kTopPThreads, ep = e ^ j;
                    exchange(c[q], comp_s[ep], e, ep, (e & k) == 0);
                }
                __syncthreads();
            } else {
#pragma unroll
                for (int q = 0; q < R; ++q) {
                    const int e = t + q * kTopPThreads, ep = e ^ j;
                    exchange(c[q], __shfl_xor_sync(0xffffffffu, c[q], j), e, ep, (e & k) == 0);
                }
            }
        }
    }
    __syncthreads();  // every exchange through comp_s is done before it becomes key_s / id_s
#pragma unroll
    for (int q = 0; q < R; ++q) key_s[t + q * kTopPThreads] = key_value(c[q]), id_s[t + q * kTopPThreads] = key_index(c[q]);
    __syncthreads();
    // (noise_s was written before the barriers of the sort, so it is visible to every thread here.)
    const float* noise = dr.tok ? (kStage ? noise_s : dr.noise + r * V) : nullptr;
    const Best b = top_p_row(key_s, id_s, out + r * V, V, top_p, noise);
    if (dr.tok) store_token(r, block_argmax(b), dr.tok, dr.hist, dr.hist_stride, dr.hist_len, dr.pos);
}

}  // namespace

namespace {

// The fused sort + filter (+ draw) for V <= kMaxFusedVocab rows.
void launch_fused(const at::Tensor& logits, const at::Tensor& out, double top_p, const Draw& dr) {
    const int64_t N = logits.size(0), V = logits.size(1);
    const float tp = static_cast<float>(top_p);
    const unsigned grid = static_cast<unsigned>(N);
    auto stream = at::cuda::getCurrentCUDAStream();
    const float* lp = logits.const_data_ptr<float>();
    float* op = out.data_ptr<float>();
    auto kernel = V <= kTopPThreads ? top_p_fused_kernel<1> : (V <= 2 * kTopPThreads ? top_p_fused_kernel<2> : top_p_fused_kernel<4>);
    cuda::launch_pdl(kernel, dim3(grid), dim3(kTopPThreads), 0, stream, lp, op, V, tp, dr);
}

}  // namespace

at::Tensor top_p_probs_cuda(const at::Tensor& logits, double top_p) {
    check_top_p(logits);
    const int64_t N = logits.size(0), V = logits.size(1);
    if (V > kMaxVocab) fail(Status::kUnsupported, "top_p_probs: vocabulary over 65536");
    c10::cuda::CUDAGuard guard(logits.device());
    at::Tensor out = at::empty({N, V}, logits.options());
    if (N == 0 || V == 0) return out;
    if (N > INT32_MAX) fail(Status::kInvalidArgument, "top_p_probs: too many rows");
    if (V <= kMaxFusedVocab) {
        launch_fused(logits, out, top_p, Draw{});
        return out;
    }
    auto [sorted, idx] = at::sort(logits, -1, /*descending=*/true);
    top_p_kernel<<<static_cast<unsigned>(N), kTopPThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        sorted.const_data_ptr<float>(), idx.const_data_ptr<int64_t>(), out.data_ptr<float>(), V, static_cast<float>(top_p));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

at::Tensor top_p_draw_cuda(const at::Tensor& logits, double temperature, double top_p, const at::Tensor& noise, const at::Tensor& hist,
                           const at::Tensor& pos, const at::Tensor& probs_out) {
    check_top_p(logits);
    const int64_t N = logits.size(0), V = logits.size(1);
    if (probs_out.defined() &&
        (probs_out.sizes() != logits.sizes() || !probs_out.is_contiguous() || probs_out.scalar_type() != c10::kFloat ||
         probs_out.device() != logits.device() || probs_out.data_ptr() == logits.data_ptr())) {
        fail(Status::kInternal, "top_p_draw: probs_out must be contiguous fp32 [N, V] on the logits' device, apart from them");
    }
    if (V > kMaxFusedVocab || V == 0 || N == 0) return top_p_draw_composite(logits, temperature, top_p, noise, hist, pos, probs_out);
    if (N > INT32_MAX) fail(Status::kInvalidArgument, "top_p_draw: too many rows");
    c10::cuda::CUDAGuard guard(logits.device());
    const at::Tensor probs = probs_out.defined() ? probs_out : at::empty({N, V}, logits.options());
    check_draw(probs, noise, hist, pos);
    at::Tensor tok = at::empty({N, 1}, logits.options().dtype(at::kLong));
    Draw dr;
    dr.noise = noise.const_data_ptr<float>();
    dr.tok = tok.data_ptr<int64_t>();
    if (hist.defined()) {
        dr.hist = hist.data_ptr<int64_t>();
        dr.hist_stride = hist.stride(0);
        dr.hist_len = hist.size(1);
        dr.pos = pos.const_data_ptr<int64_t>();
    }
    // The temperature through ATen's own division (its rounding of the reciprocal is its own business); at 1 the
    // division is the identity and is skipped.
    launch_fused(temperature == 1.0 ? logits : (logits / temperature).contiguous(), probs, top_p, dr);
    return tok;
}

at::Tensor draw_token_cuda(const at::Tensor& probs, const at::Tensor& noise, const at::Tensor& hist, const at::Tensor& pos) {
    check_draw(probs, noise, hist, pos);
    const int64_t N = probs.size(0), V = probs.size(1);
    c10::cuda::CUDAGuard guard(probs.device());
    at::Tensor tok = at::empty({N, 1}, probs.options().dtype(at::kLong));
    if (N == 0) return tok;
    if (V == 0) fail(Status::kInternal, "draw_token: empty vocabulary");
    if (N > INT32_MAX) fail(Status::kInvalidArgument, "draw_token: too many rows");
    draw_kernel<<<static_cast<unsigned>(N), kDrawThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        probs.const_data_ptr<float>(), noise.const_data_ptr<float>(), V, tok.data_ptr<int64_t>(),
        hist.defined() ? hist.data_ptr<int64_t>() : nullptr, hist.defined() ? hist.stride(0) : 0, hist.defined() ? hist.size(1) : 0,
        pos.defined() ? pos.const_data_ptr<int64_t>() : nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return tok;
}

}  // namespace cn::kernels
