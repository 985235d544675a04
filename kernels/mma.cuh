// Tensor-core and async-copy helpers shared by cutenative's mma.sync kernels (kernels/rope_attention.cu,
// kernels/rows_gemm_mma.cu): the m16n8k16 product, packing two values into one fragment register, ldmatrix, cp.async.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda_util.cuh"

namespace cn::kernels::cuda {

// c += a b for one m16n8k16 tile: a 16x16 (row-major fragment, 4 registers of two T), b 16x8 (2 registers), c 16x8
// fp32 (PTX ISA's fragment layouts: lane = 4 g + t holds rows g and g + 8, columns 2 t and 2 t + 1 of c). T: __nv_bfloat16
// or __half.
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// Two values rounded to T, packed as one register (the first in the low half).
template <class T>
__device__ __forceinline__ uint32_t pack2(float first, float second) {
    const T v[2] = {from_f<T>(first), from_f<T>(second)};
    uint32_t r;
    memcpy(&r, v, sizeof(r));
    return r;
}

// Four 8x8 matrices of 16-bit values from shared memory: lanes 8 i .. 8 i + 7 give the row addresses of matrix i,
// and register i receives matrix i in the mma fragment layout (lane 4 g + t: row g, columns 2 t and 2 t + 1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
// Two such matrices (lanes 0-15 give the addresses).
__device__ __forceinline__ void ldmatrix_x2(uint32_t& r0, uint32_t& r1, const void* row) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(a));
}
// The same four matrices transposed: register i receives matrix i's column pairs (the B fragment of a row-major
// k x n tile).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// 16 bytes global -> shared without a register round trip (cp.async; completed by cp_async_wait_all).
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
// The same, or (!read) 16 zero bytes without reading src (src must still be a valid address).
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, bool read) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    const int bytes = read ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed cp.async groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace cn::kernels::cuda
