// CUDA paths of kernels/kv_cache.h: rope_kv_append_ (one thread per element pair of the new token's q, k and
// v) and decode_attention (one block per (row, head), a warp per cache row: scores in shared memory, fp32
// softmax, fixed-order sums), which can first do the append of its own (row, head) (decode_attention_append).
#include "kernels/kv_cache.h"

#include <type_traits>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels {

void check_kv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache, const at::Tensor& v_cache,
              const at::Tensor& pos, const at::Tensor& inv_freq);  // kv_cache.cpp

namespace {

using cuda::from_f;
using cuda::round_to;
using cuda::to_f;

struct View3 {  // an [N, H, hd] view: element (n, h, i) at n * s0 + h * s1 + i
    int64_t s0 = 0, s1 = 0;
};

template <class T>
__global__ void rope_kv_append_kernel(T* q, View3 qv, const T* __restrict__ k, View3 kv, const T* __restrict__ v, View3 vv,
                                      T* __restrict__ kc, T* __restrict__ vc, int64_t H, int64_t M, int64_t half,
                                      const float* __restrict__ inv, const int64_t* __restrict__ pos, int64_t total) {
    const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (t >= total) return;
    const int64_t i = t % half, nh = t / half, h = nh % H, n = nh / H;
    const int64_t p = *pos;
    if (p < 0 || p >= M) return;  // the caller guarantees 0 <= p < M; never write outside the cache
    const int64_t hd = 2 * half;
    T* kdst = kc + (nh * M + p) * hd;
    T* vdst = vc + (nh * M + p) * hd;
    const T* ks = k + n * kv.s0 + h * kv.s1;
    const T* vs = v + n * vv.s0 + h * vv.s1;
    vdst[i] = vs[i];
    vdst[i + half] = vs[i + half];
    if (!inv) {
        kdst[i] = ks[i];
        kdst[i + half] = ks[i + half];
        return;
    }
    const float f = inv[i] * static_cast<float>(p);
    const float c = round_to<T>(cosf(f)), s = round_to<T>(sinf(f));
    {
        const float x1 = to_f(ks[i]), x2 = to_f(ks[i + half]);
        kdst[i] = from_f<T>(round_to<T>(__fmul_rn(x1, c)) - round_to<T>(__fmul_rn(x2, s)));
        kdst[i + half] = from_f<T>(round_to<T>(__fmul_rn(x2, c)) + round_to<T>(__fmul_rn(x1, s)));
    }
    if (q) {
        T* qp = q + n * qv.s0 + h * qv.s1;
        const float x1 = to_f(qp[i]), x2 = to_f(qp[i + half]);
        qp[i] = from_f<T>(round_to<T>(__fmul_rn(x1, c)) - round_to<T>(__fmul_rn(x2, s)));
        qp[i + half] = from_f<T>(round_to<T>(__fmul_rn(x2, c)) + round_to<T>(__fmul_rn(x1, s)));
    }
}

constexpr int kAttnThreads = 256;  // 8 warps
constexpr int kAttnWarps = kAttnThreads / 32;
constexpr int kMaxHeadDim = 256;  // 8 values per lane
constexpr int64_t kMaxAttnRows = 8192;

// One block per (row, head). Warp w owns cache rows j = w, w + 8, ...; lane l owns head dims l, l + 32, ...
// (PL = ceil(hd / 32) values; coalesced row reads), 32 / PL rows at a time so their loads are in flight
// together (the step is latency-bound: few blocks, short rows; 128 rows of hd 64 take one round trip). Scores go to shared memory; the weighted sum of V is accumulated per warp in
// registers, then the 8 warps' partial sums are added in a fixed order.
// The new token's row for the append (decode_attention_append): k and v views, RoPE table (null: no rotation).
template <class T>
struct Append {
    const T* k = nullptr;
    View3 kv;
    const T* v = nullptr;
    View3 vv;
    const float* inv = nullptr;
};

// APPEND: first this block's (row, head) cache row at p, exactly as rope_kv_append_kernel writes it (q rotated
// in place too), then a barrier, so the row is read back like any other. q and the caches are then written in
// this launch: no __restrict__ on them (no read-only cache path for data the kernel writes).
template <class T, int PL, bool APPEND>
__global__ void __launch_bounds__(kAttnThreads)
    decode_attention_kernel(T* q, View3 qv, T* kc, T* vc, int64_t H, int64_t M, int hd, const int64_t* __restrict__ pos, float scale,
                            T* __restrict__ out, Append<T> ap) {
    extern __shared__ float sm[];
    cuda::pdl_trigger();
    const int64_t nh = blockIdx.x, n = nh / H, h = nh % H;
    cuda::pdl_wait();  // everything this kernel reads or writes belongs to earlier kernels
    int64_t p = *pos;
    if constexpr (APPEND) {
        if (p >= 0 && p < M) {  // the caller guarantees 0 <= p < M; never write outside the cache
            const int half = hd / 2;
            T* kdst = kc + (nh * M + p) * hd;
            T* vdst = vc + (nh * M + p) * hd;
            const T* ks = ap.k + n * ap.kv.s0 + h * ap.kv.s1;
            const T* vs = ap.v + n * ap.vv.s0 + h * ap.vv.s1;
            for (int i = threadIdx.x; i < half; i += blockDim.x) {
                vdst[i] = vs[i];
                vdst[i + half] = vs[i + half];
                if (!ap.inv) {
                    kdst[i] = ks[i];
                    kdst[i + half] = ks[i + half];
                    continue;
                }
                const float f = ap.inv[i] * static_cast<float>(p);
                const float c = round_to<T>(cosf(f)), s = round_to<T>(sinf(f));
                {
                    const float x1 = to_f(ks[i]), x2 = to_f(ks[i + half]);
                    kdst[i] = from_f<T>(round_to<T>(__fmul_rn(x1, c)) - round_to<T>(__fmul_rn(x2, s)));
                    kdst[i + half] = from_f<T>(round_to<T>(__fmul_rn(x2, c)) + round_to<T>(__fmul_rn(x1, s)));
                }
                T* qp = q + n * qv.s0 + h * qv.s1;
                const float x1 = to_f(qp[i]), x2 = to_f(qp[i + half]);
                qp[i] = from_f<T>(round_to<T>(__fmul_rn(x1, c)) - round_to<T>(__fmul_rn(x2, s)));
                qp[i + half] = from_f<T>(round_to<T>(__fmul_rn(x2, c)) + round_to<T>(__fmul_rn(x1, s)));
            }
        }
        __syncthreads();  // the row and q are visible to the whole block
    }
    p = p < 0 ? 0 : (p >= M ? M - 1 : p);  // the caller guarantees 0 <= p < M; never read outside the cache
    const int64_t L = p + 1;
    float* sc = sm;        // [M] scores, then weights
    float* part = sc + M;  // [kAttnWarps][hd] partial outputs
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int per_lane = PL, kUnroll = 32 / PL;
    const T* qp = q + n * qv.s0 + h * qv.s1;
    float qr[PL];
#pragma unroll
    for (int c = 0; c < PL; ++c) qr[c] = (c < per_lane && lane + 32 * c < hd) ? to_f(qp[lane + 32 * c]) : 0.f;
    const T* kb = kc + nh * M * hd;
    const T* vb = vc + nh * M * hd;
    if (L <= kAttnWarps * kUnroll) {
        // One pass (every row's K and V loads in flight at once): warp w's rows j = w + 8u, its own softmax
        // statistics (max m_w, sum l_w) and weighted V sum; one barrier, then the warps are merged with
        // exp(m_w - m) factors. Equal to the two-pass softmax up to fp32 rounding.
        __shared__ float wstat[2 * kAttnWarps];
        float s[kUnroll], kk[kUnroll][PL], vv[kUnroll][PL];
        // Unconditional loads (rows past L and dims past hd read row 0 / dim 0 and are zeroed after): predicated
        // loads feeding an FMA each were issued one at a time, a memory round trip per row.
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t j = warp + static_cast<int64_t>(u) * kAttnWarps, jr = j < L ? j : 0;
#pragma unroll
            for (int c = 0; c < PL; ++c) {
                const int i = lane + 32 * c, ir = i < hd ? i : 0;
                kk[u][c] = to_f(kb[jr * hd + ir]);
                vv[u][c] = to_f(vb[jr * hd + ir]);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const bool row = warp + u * kAttnWarps < L;
            s[u] = 0.f;
#pragma unroll
            for (int c = 0; c < PL; ++c) {
                const bool ok = row && lane + 32 * c < hd;
                s[u] += ok ? qr[c] * kk[u][c] : 0.f;
                vv[u][c] = ok ? vv[u][c] : 0.f;
            }
        }
        float mw = -INFINITY;
        bool nan = false;  // fmaxf drops NaN: a NaN score must still make the output NaN, as the softmax does
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            for (int o = 16; o > 0; o >>= 1) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
            s[u] = warp + u * kAttnWarps < L ? s[u] * scale : -INFINITY;
            nan = nan || isnan(s[u]);
            mw = fmaxf(mw, s[u]);
        }
        if (nan) mw = NAN;  // then every weight, the warp's sums and the merged output are NaN
        float lw = 0.f, acc[PL];
#pragma unroll
        for (int c = 0; c < PL; ++c) acc[c] = 0.f;
        if (mw != -INFINITY) {  // a warp without rows (L < 8) contributes nothing
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const float e = s[u] == -INFINITY ? 0.f : expf(s[u] - mw);
                lw += e;
#pragma unroll
                for (int c = 0; c < PL; ++c) acc[c] += e * vv[u][c];
            }
        }
        float* part = sm;  // [kAttnWarps][hd]
#pragma unroll
        for (int c = 0; c < PL; ++c) {
            const int i = lane + 32 * c;
            if (i < hd) part[warp * hd + i] = acc[c];
        }
        if (lane == 0) wstat[2 * warp] = mw, wstat[2 * warp + 1] = lw;
        __syncthreads();
        float m = -INFINITY;
#pragma unroll
        for (int w = 0; w < kAttnWarps; ++w) m = fmaxf(m, wstat[2 * w]);
        float f[kAttnWarps], sum = 0.f;
#pragma unroll
        for (int w = 0; w < kAttnWarps; ++w) {
            f[w] = wstat[2 * w] == -INFINITY ? 0.f : expf(wstat[2 * w] - m);
            sum += wstat[2 * w + 1] * f[w];
        }
        T* o = out + nh * hd;
        for (int i = threadIdx.x; i < hd; i += blockDim.x) {
            float r = 0.f;
#pragma unroll
            for (int w = 0; w < kAttnWarps; ++w) r += part[w * hd + i] * f[w];
            o[i] = from_f<T>(r / sum);
        }
        return;
    }
    for (int64_t j0 = warp; j0 < L; j0 += kAttnWarps * kUnroll) {
        float s[kUnroll], kk[kUnroll][PL];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {  // all loads first (unconditional, clamped), as in the one-pass path
            const int64_t j = j0 + static_cast<int64_t>(u) * kAttnWarps, jr = j < L ? j : 0;
#pragma unroll
            for (int c = 0; c < PL; ++c) {
                const int i = lane + 32 * c;
                kk[u][c] = to_f(kb[jr * hd + (i < hd ? i : 0)]);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t j = j0 + static_cast<int64_t>(u) * kAttnWarps;
            s[u] = 0.f;
#pragma unroll
            for (int c = 0; c < PL; ++c) s[u] += (j < L && c < per_lane && lane + 32 * c < hd) ? qr[c] * kk[u][c] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            for (int o = 16; o > 0; o >>= 1) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
            const int64_t j = j0 + static_cast<int64_t>(u) * kAttnWarps;
            if (lane == 0 && j < L) sc[j] = s[u] * scale;
        }
    }
    __syncthreads();
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) m = fmaxf(m, sc[j]);
    m = cuda::block_max(m);
    float local = 0.f;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
        const float e = expf(sc[j] - m);
        sc[j] = e;
        local += e;
    }
    const float sum = cuda::block_sum(local);  // ends with a barrier: sc is complete
    float acc[PL];
#pragma unroll
    for (int c = 0; c < PL; ++c) acc[c] = 0.f;
    for (int64_t j0 = warp; j0 < L; j0 += kAttnWarps * kUnroll) {
        float vv[kUnroll][PL];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t j = j0 + static_cast<int64_t>(u) * kAttnWarps;
#pragma unroll
            for (int c = 0; c < PL; ++c) {
                const int i = lane + 32 * c;
                vv[u][c] = (j < L && c < per_lane && i < hd) ? to_f(vb[j * hd + i]) : 0.f;
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t j = j0 + static_cast<int64_t>(u) * kAttnWarps;
            const float wgt = j < L ? sc[j] : 0.f;
#pragma unroll
            for (int c = 0; c < PL; ++c) acc[c] += wgt * vv[u][c];
        }
    }
#pragma unroll
    for (int c = 0; c < PL; ++c) {
        const int i = lane + 32 * c;
        if (c < per_lane && i < hd) part[warp * hd + i] = acc[c];
    }
    __syncthreads();
    T* o = out + nh * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float r = 0.f;
        for (int w = 0; w < kAttnWarps; ++w) r += part[w * hd + i];
        o[i] = from_f<T>(r / sum);
    }
}

View3 view_of(const at::Tensor& t) { return t.defined() ? View3{t.stride(0), t.stride(1)} : View3{}; }

}  // namespace

void rope_kv_append_cuda_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache,
                          const at::Tensor& v_cache, const at::Tensor& pos, const at::Tensor& inv_freq) {
    if (!k.defined() || !v.defined() || (q.defined() && !inv_freq.defined())) {
        fail(Status::kInternal, "rope_kv_append_: k and v are required; q only with inv_freq");
    }
    check_kv(q, k, v, k_cache, v_cache, pos, inv_freq);
    if (k_cache.size(3) % 2 != 0) fail(Status::kInternal, "rope_kv_append_: head dim must be even");
    c10::cuda::CUDAGuard guard(k_cache.device());
    const int64_t N = k_cache.size(0), H = k_cache.size(1), M = k_cache.size(2), half = k_cache.size(3) / 2;
    const int64_t total = N * H * half;
    if (total == 0) return;
    const int threads = 128;
    const int64_t blocks = (total + threads - 1) / threads;
    if (blocks > INT32_MAX) fail(Status::kInvalidArgument, "rope_kv_append_: tensor too large for one launch");
    CN_DISPATCH_FLOAT_TYPES(k_cache.scalar_type(), "rope_kv_append_", [&] {
        rope_kv_append_kernel<scalar_t><<<static_cast<unsigned>(blocks), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            q.defined() ? reinterpret_cast<scalar_t*>(q.data_ptr()) : nullptr, view_of(q),
            reinterpret_cast<const scalar_t*>(k.const_data_ptr()), view_of(k), reinterpret_cast<const scalar_t*>(v.const_data_ptr()),
            view_of(v), reinterpret_cast<scalar_t*>(k_cache.data_ptr()), reinterpret_cast<scalar_t*>(v_cache.data_ptr()), H, M, half,
            inv_freq.defined() ? inv_freq.const_data_ptr<float>() : nullptr, pos.const_data_ptr<int64_t>(), total);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
}

at::Tensor decode_attention_cuda(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& pos,
                                 double scale, const at::Tensor& k, const at::Tensor& v, const at::Tensor& inv_freq) {
    if (!q.defined()) fail(Status::kInternal, "decode_attention: q is required");
    const bool append = k.defined() || v.defined();
    if (append && (!k.defined() || !v.defined())) fail(Status::kInternal, "decode_attention_append: k and v are required");
    if (!append && inv_freq.defined()) fail(Status::kInternal, "decode_attention: inv_freq only with an append");
    check_kv(q, k, v, k_cache, v_cache, pos, inv_freq);
    if (append && k_cache.size(3) % 2 != 0) fail(Status::kInternal, "decode_attention_append: head dim must be even");
    const int64_t N = k_cache.size(0), H = k_cache.size(1), M = k_cache.size(2), hd = k_cache.size(3);
    if (M > kMaxAttnRows || hd > kMaxHeadDim)
        fail(Status::kUnsupported, "decode_attention: cache longer than 8192 rows or head dim over 256");
    c10::cuda::CUDAGuard guard(k_cache.device());
    at::Tensor out = at::empty({N, H * hd}, k_cache.options());
    if (N * H == 0 || hd == 0 || M == 0) return out;
    if (N * H > INT32_MAX) fail(Status::kInvalidArgument, "decode_attention: too many rows for one launch");
    const size_t smem = static_cast<size_t>(M + kAttnWarps * hd) * sizeof(float);
    CN_DISPATCH_FLOAT_TYPES(k_cache.scalar_type(), "decode_attention", [&] {
        const int pl = static_cast<int>((hd + 31) / 32);
        using T = scalar_t;
        auto pick = [&](auto app) {
            constexpr bool A = decltype(app)::value;
            return pl <= 1   ? decode_attention_kernel<T, 1, A>
                   : pl <= 2 ? decode_attention_kernel<T, 2, A>
                   : pl <= 4 ? decode_attention_kernel<T, 4, A>
                             : decode_attention_kernel<T, 8, A>;
        };
        auto kernel = append ? pick(std::true_type{}) : pick(std::false_type{});
        if (smem > 48 * 1024)
            C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        Append<T> ap;
        if (append) {
            ap.k = reinterpret_cast<const T*>(k.const_data_ptr());
            ap.kv = view_of(k);
            ap.v = reinterpret_cast<const T*>(v.const_data_ptr());
            ap.vv = view_of(v);
            ap.inv = inv_freq.defined() ? inv_freq.const_data_ptr<float>() : nullptr;
        }
        // What the launch writes goes through data_ptr() (q only with RoPE, the caches only with an append).
        auto ptr = [](const at::Tensor& t, bool written) {
            return written ? reinterpret_cast<T*>(t.data_ptr()) : const_cast<T*>(reinterpret_cast<const T*>(t.const_data_ptr()));
        };
        cuda::launch_pdl(kernel, dim3(static_cast<unsigned>(N * H)), dim3(kAttnThreads), smem, at::cuda::getCurrentCUDAStream(),
                         ptr(q, append && inv_freq.defined()), view_of(q), ptr(k_cache, append), ptr(v_cache, append), H, M,
                         static_cast<int>(hd), pos.const_data_ptr<int64_t>(), static_cast<float>(scale),
                         reinterpret_cast<T*>(out.data_ptr()), ap);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out;
}

}  // namespace cn::kernels
