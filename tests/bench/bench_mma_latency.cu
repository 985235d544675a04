// cn_bench_mma — the tensor-core facts behind kernels/rows_gemm_mma.h's design, on one warp of one SM (not a test:
// run by hand on a GPU, docs/benchmarks.md #19 ninth step): cycles per step of a chain of dependent mma.sync m16n8k16
// bf16 (fp32 accumulation: the chain a batch-invariant GEMM's output is), with 1, 2 and 4 such chains interleaved
// (where the warp's issue rate, not the dependency, bounds a step), and the latency of a dependent ldmatrix.x4. clock64
// around 1024 steps; each measurement printed twice.
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <int CHAINS>
__global__ void chain(float* out, long long* cyc, uint32_t seed) {
    uint32_t a[4] = {seed, seed + 1, seed + 2, seed + 3};
    float c[CHAINS][4] = {};
    long long t0 = clock64();
    for (int i = 0; i < 1024; ++i) {
#pragma unroll
        for (int k = 0; k < CHAINS; ++k) mma(c[k], a, seed + k, seed);
    }
    long long t1 = clock64();
    float s = 0;
    for (int k = 0; k < CHAINS; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    out[threadIdx.x] = s;
    if (threadIdx.x == 0) *cyc = t1 - t0;
}
__global__ void ldsm(float* out, long long* cyc) {
    __shared__ __align__(16) uint32_t sm[32 * 8 * 4];
    for (int i = threadIdx.x; i < 32 * 8 * 4; i += 32) sm[i] = 0;  // zeros: the loaded value adds 0 to the address
    __syncwarp();
    unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(sm)) + (threadIdx.x % 8) * 16 * 4;
    uint32_t r0 = 0, r1, r2, r3;
    long long t0 = clock64();
    for (int i = 0; i < 1024; ++i) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                     : "r"(base + r0));
    }
    long long t1 = clock64();
    out[threadIdx.x] = r0 + r1 + r2 + r3;
    if (threadIdx.x == 0) *cyc = t1 - t0;
}
// Copies the cycle count back; exits with a message on any CUDA error (no device, a failed launch).
static long long fetch(const long long* cyc) {
    long long h = 0;
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(&h, cyc, 8, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        printf("cn_bench_mma: %s\n", cudaGetErrorString(e));
        exit(1);
    }
    return h;
}
int main() {
    float* out = nullptr;
    long long* cyc = nullptr;
    if (cudaMalloc(&out, 4096) != cudaSuccess || cudaMalloc(&cyc, 8) != cudaSuccess) {
        printf("cn_bench_mma: no CUDA device\n");
        return 1;
    }
    for (int rep = 0; rep < 2; ++rep) {
        chain<1><<<1, 32>>>(out, cyc, 0x3f803f80u);
        printf("mma 1 chain: %.1f cycles per step\n", fetch(cyc) / 1024.0);
        chain<2><<<1, 32>>>(out, cyc, 0x3f803f80u);
        printf("mma 2 chains: %.1f cycles per step\n", fetch(cyc) / 1024.0);
        chain<4><<<1, 32>>>(out, cyc, 0x3f803f80u);
        printf("mma 4 chains: %.1f cycles per step\n", fetch(cyc) / 1024.0);
        ldsm<<<1, 32>>>(out, cyc);
        printf("ldmatrix x4 dependent: %.1f cycles\n", fetch(cyc) / 1024.0);
    }
    return 0;
}
