// CUDA path of rope_attention (kernels/rope_attention.h): the two products on tensor cores (mma.sync m16n8k16,
// fp32 accumulation), RoPE applied while q and k are staged in shared memory.
#include "kernels/rope_attention.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda_util.cuh"
#include "kernels/mma.cuh"
#include "kernels/rope.cuh"
#include "kernels/rope.h"

namespace cn::kernels {

void check_rope_attention(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t heads);  // .cpp

namespace {

using cuda::cp_async16;
using cuda::cp_async_wait_all;
using cuda::from_f;
using cuda::ldmatrix_x4_trans;
using cuda::mma16816;
using cuda::pack2;
using cuda::pdl_trigger;
using cuda::pdl_wait;
using cuda::rope_rotate;
using cuda::round_to;
using cuda::to_f;
using rope_attention_detail::kWarps;

__device__ __forceinline__ uint32_t ld32(const void* p) { return *reinterpret_cast<const uint32_t*>(p); }

// grid B * H (a block per series and head), min(kWarps, ceil(S / 16)) warps. Shared memory: q, k and v [Sp][DK + 8] in T (Sp = S
// rounded up to 16; the padding rows zero), the RoPE table's S positions [S][DK/2] float2, the key mask [Sp] in
// fp32 (-inf past S). The row stride (DK + 8 elements) makes every fragment load of a warp hit 32 distinct banks.
// Staging: every 16-byte chunk of q, k, v and the table is copied at once (cp.async), then q and k are rotated in
// place (kernels/rope.cuh's arithmetic).
// A warp takes 16 queries at a time (their A fragments in registers) and their keys 16 at a time: the scores of a
// tile of 8 keys are DK / 16 mma steps; an online softmax (the running maximum per query; the sum and the output
// rescaled by exp(old max - new max) when it grows), p = exp(score - max) in fp32, multiplied by v on tensor cores
// as two products, round_T(p) and round_T(p - round_T(p)) (so p keeps ~16 bits, not T's 8 or 11); the sum
// of p in fp32, a multiply by its reciprocal and one rounding to T at the end. exp is __expf (ex2.approx: a few
// fp32 ulps). Every sum's order depends on (S, DK) only.
template <class T, int DK>
__global__ void __launch_bounds__(kWarps * 32, DK <= 64 ? 6 : 4)
    rope_attention_mma_kernel(const T* __restrict__ qkv, const T* __restrict__ bias, const float2* __restrict__ table, T* __restrict__ out,
                              int S, int H) {
    static_assert(DK % 16 == 0, "DK must be a multiple of 16");
    constexpr int HALF = DK / 2, LD = DK + 8, KSTEPS = DK / 16, CHUNKS = DK / 8;
    extern __shared__ __align__(16) unsigned char smem[];
    const int Sp = (S + 15) & ~15, I = H * DK;
    T* qs = reinterpret_cast<T*>(smem);  // q | k | v, each [Sp][LD]
    T* ks = qs + Sp * LD;
    T* vs = ks + Sp * LD;
    float2* tab = reinterpret_cast<float2*>(vs + Sp * LD);  // [S][HALF]
    float* mask = reinterpret_cast<float*>(tab + S * HALF);
    const int b = blockIdx.x / H, h = blockIdx.x % H;
    const T* base = qkv + static_cast<int64_t>(b) * S * 3 * I + h * DK;

    // Launched with PDL (cuda_util.cuh): the next kernel may start early, and this one reads nothing before the
    // previous kernel has completed (the table too is written by an earlier kernel of the call).
    pdl_trigger();
    pdl_wait();
    // 1. Stage q, k, v (which = 0, 1, 2), the table and the mask; 2. rotate q and k in place (a thread per two
    // adjacent pairs (i, i + DK/2)).
    for (int c = threadIdx.x; c < S * HALF / 2; c += blockDim.x) cp_async16(tab + 2 * c, table + 2 * c);
    for (int which = 0; which < 3; ++which) {  // no division by a run-time value in the index arithmetic
        for (int c = threadIdx.x; c < Sp * CHUNKS; c += blockDim.x) {
            const int r = c / CHUNKS, d0 = (c % CHUNKS) * 8;
            T* dst = qs + which * Sp * LD + r * LD + d0;
            if (r < S)
                cp_async16(dst, base + static_cast<int64_t>(r) * 3 * I + which * I + d0);
            else
                *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
        }
    }
    for (int s = threadIdx.x; s < Sp; s += blockDim.x) mask[s] = s < S ? to_f(bias[static_cast<int64_t>(b) * S + s]) : -INFINITY;
    cp_async_wait_all();
    __syncthreads();
    // Two adjacent pairs per thread, (i, i + DK/2) and (i + 1, i + 1 + DK/2): a warp reads its rows' table entries
    // as consecutive 16-byte chunks, with no bank conflicts (a thread per 8 pairs made them 16-way; removing that
    // alone changed nothing measurable on the H100, the kernel being bound by its instruction count; the
    // arithmetic per element is the same).
    constexpr int DUOS = HALF / 2;
    for (int c = threadIdx.x; c < 2 * S * DUOS; c += blockDim.x) {  // q's S rows, then k's
        const int rr = c / DUOS, r = rr < S ? rr : rr - S, i = (c % DUOS) * 2;
        T* x = qs + (rr < S ? r : Sp + r) * LD + i;
        const uint32_t xa = ld32(x), xz = ld32(x + HALF);
        const float4 cs = *reinterpret_cast<const float4*>(tab + r * HALF + i);  // the table's entries i and i + 1
        T a[2], z[2];
        memcpy(a, &xa, sizeof(xa));
        memcpy(z, &xz, sizeof(xz));
        float y1, y2, w1, w2;
        rope_rotate<T>(to_f(a[0]), to_f(z[0]), make_float2(cs.x, cs.y), y1, y2);
        rope_rotate<T>(to_f(a[1]), to_f(z[1]), make_float2(cs.z, cs.w), w1, w2);
        *reinterpret_cast<uint32_t*>(x) = pack2<T>(y1, w1);
        *reinterpret_cast<uint32_t*>(x + HALF) = pack2<T>(y2, w2);
    }
    __syncthreads();

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t2 = (lane % 4) * 2, warps = blockDim.x / 32;
    for (int r0 = warp * 16; r0 < S; r0 += warps * 16) {
        uint32_t qa[KSTEPS][4];  // this warp's 16 queries as mma A fragments
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            const T* q = qs + (r0 + g) * LD + kk * 16 + t2;
            qa[kk][0] = ld32(q);
            qa[kk][1] = ld32(q + 8 * LD);
            qa[kk][2] = ld32(q + 8);
            qa[kk][3] = ld32(q + 8 * LD + 8);
        }
        float acc[DK / 8][4] = {};
        float mx0 = -INFINITY, mx1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows g and g + 8: running max and sum
        for (int kt = 0; kt < Sp / 16; ++kt) {                         // 16 keys: two tiles of scores, then the A operand of p v
            // Scores of keys 16 kt + 8 j .. + 7 plus the mask: p[j][0], p[j][1] of row g (keys + t2, + t2 + 1),
            // p[j][2], p[j][3] of row g + 8.
            float p[2][4];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int n = 2 * kt + j;
                const T* k = ks + (n * 8 + g) * LD + t2;
                p[j][0] = p[j][1] = p[j][2] = p[j][3] = 0.0f;
#pragma unroll
                for (int kk = 0; kk < KSTEPS; ++kk) mma16816<T>(p[j], qa[kk], ld32(k + kk * 16), ld32(k + kk * 16 + 8));
                const float m0 = mask[n * 8 + t2], m1 = mask[n * 8 + t2 + 1];
                p[j][0] += m0;
                p[j][1] += m1;
                p[j][2] += m0;
                p[j][3] += m1;
            }
            // Online softmax: the new running maximum, the old terms rescaled by exp(old - new).
            float b0 = fmaxf(fmaxf(p[0][0], p[0][1]), fmaxf(p[1][0], p[1][1]));
            float b1 = fmaxf(fmaxf(p[0][2], p[0][3]), fmaxf(p[1][2], p[1][3]));
#pragma unroll
            for (int o = 1; o <= 2; o <<= 1) {
                b0 = fmaxf(b0, __shfl_xor_sync(0xffffffffu, b0, o));
                b1 = fmaxf(b1, __shfl_xor_sync(0xffffffffu, b1, o));
            }
            const float n0 = fmaxf(mx0, b0), n1 = fmaxf(mx1, b1);  // finite: block 0 holds key 0, whose mask is 0 or lowest
            const float s0 = __expf(mx0 - n0), s1 = __expf(mx1 - n1);
            mx0 = n0;
            mx1 = n1;
            l0 *= s0;
            l1 *= s1;
#pragma unroll
            for (int dn = 0; dn < DK / 8; ++dn) {
                acc[dn][0] *= s0;
                acc[dn][1] *= s0;
                acc[dn][2] *= s1;
                acc[dn][3] *= s1;
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                p[j][0] = __expf(p[j][0] - mx0);
                p[j][1] = __expf(p[j][1] - mx0);
                p[j][2] = __expf(p[j][2] - mx1);
                p[j][3] = __expf(p[j][3] - mx1);
                l0 += p[j][0] + p[j][1];
                l1 += p[j][2] + p[j][3];
            }
            uint32_t hi[4], lo[4];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    const float a = p[j][2 * rr], z = p[j][2 * rr + 1];
                    const float ah = round_to<T>(a), zh = round_to<T>(z);
                    hi[2 * j + rr] = pack2<T>(ah, zh);
                    lo[2 * j + rr] = pack2<T>(a - ah, z - zh);
                }
            }
            // v's B fragments for dims 8 dn .. 8 dn + 15: matrices (keys 0-7 | 8-15) x (dims of dn | dn + 1).
            const T* v = vs + (kt * 16 + (lane / 8 % 2) * 8 + lane % 8) * LD + (lane / 16) * 8;
#pragma unroll
            for (int dn = 0; dn < DK / 8; dn += 2) {
                uint32_t f[4];
                ldmatrix_x4_trans(f, v + dn * 8);
                mma16816<T>(acc[dn], hi, f[0], f[1]);
                mma16816<T>(acc[dn], lo, f[0], f[1]);
                mma16816<T>(acc[dn + 1], hi, f[2], f[3]);
                mma16816<T>(acc[dn + 1], lo, f[2], f[3]);
            }
        }
#pragma unroll
        for (int o = 1; o <= 2; o <<= 1) {
            l0 += __shfl_xor_sync(0xffffffffu, l0, o);
            l1 += __shfl_xor_sync(0xffffffffu, l1, o);
        }
        const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
        const int row0 = r0 + g, row1 = r0 + g + 8;
        T* o0 = out + (static_cast<int64_t>(b) * S + row0) * I + h * DK + t2;
        T* o1 = o0 + static_cast<int64_t>(8) * I;
#pragma unroll
        for (int dn = 0; dn < DK / 8; ++dn) {
            if (row0 < S) *reinterpret_cast<uint32_t*>(o0 + dn * 8) = pack2<T>(acc[dn][0] * inv0, acc[dn][1] * inv0);
            if (row1 < S) *reinterpret_cast<uint32_t*>(o1 + dn * 8) = pack2<T>(acc[dn][2] * inv1, acc[dn][3] * inv1);
        }
    }
}

template <int DK>
void launch(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& table, const at::Tensor& out, int64_t H, size_t shared,
            cudaStream_t stream) {
    const int64_t B = qkv.size(0), S = qkv.size(1);
    auto go = [&](auto tag) {
        using T = decltype(tag);
        auto kernel = rope_attention_mma_kernel<T, DK>;
        if (shared > 48 * 1024)
            C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
        // A warp per 16 queries, at most kWarps (then each takes more than one group of 16).
        const int warps = static_cast<int>(std::min<int64_t>(kWarps, (S + 15) / 16));
        cuda::launch_pdl(kernel, dim3(static_cast<unsigned>(B * H)), dim3(static_cast<unsigned>(warps * 32)), shared, stream,
                         reinterpret_cast<const T*>(qkv.const_data_ptr()), reinterpret_cast<const T*>(bias.const_data_ptr()),
                         reinterpret_cast<const float2*>(table.const_data_ptr()), reinterpret_cast<T*>(out.data_ptr()), static_cast<int>(S),
                         static_cast<int>(H));
    };
    if (qkv.scalar_type() == at::kBFloat16) {
        go(__nv_bfloat16{});
    } else {
        go(__half{});
    }
}

}  // namespace

at::Tensor rope_attention_cuda(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t H,
                               const at::Tensor& table_in) {
    check_rope_attention(qkv, bias, inv_freq, H);
    const int64_t B = qkv.size(0), S = qkv.size(1), dk = qkv.size(2) / (3 * H);
    if (!rope_attention_cuda_takes(qkv, H))
        fail(Status::kInternal, "rope_attention: input beyond the CUDA path (rope_attention_cuda_takes)");
    at::Tensor out = at::empty({B, S, H * dk}, qkv.options());
    if (B == 0) return out;
    const at::Tensor table = table_in.defined() ? table_in : rope_table_cuda(inv_freq, S, qkv.scalar_type());
    if (table.dim() != 3 || table.size(0) < S || table.size(1) != dk / 2 || table.size(2) != 2 || table.scalar_type() != at::kFloat ||
        !table.is_contiguous() || table.device() != qkv.device() || reinterpret_cast<uintptr_t>(table.const_data_ptr()) % 16 != 0) {
        fail(Status::kInternal, "rope_attention: table must be rope_table(inv_freq, S, dtype) (16-byte aligned: cp.async)");
    }
    const c10::cuda::CUDAGuard guard(qkv.device());
    const size_t shared = static_cast<size_t>(rope_attention_detail::shared_bytes(S, dk));
    auto stream = at::cuda::getCurrentCUDAStream();
    switch (dk) {
        case 32: launch<32>(qkv, bias, table, out, H, shared, stream); break;
        case 64: launch<64>(qkv, bias, table, out, H, shared, stream); break;
        default: launch<128>(qkv, bias, table, out, H, shared, stream); break;
    }
    return out;
}

}  // namespace cn::kernels
