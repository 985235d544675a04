// cn_bench_mma — the hardware facts behind kernels/rows_gemm_mma.h's design (not a test: run by hand on a GPU,
// docs/benchmarks.md #19 ninth step):
// - on one warp of one SM: cycles per step of a chain of dependent mma.sync m16n8k16 bf16 (fp32 accumulation: the
//   chain a batch-invariant GEMM's output is), with 1, 2 and 4 such chains interleaved (where the warp's issue rate,
//   not the dependency, bounds a step), and the latency of a dependent ldmatrix.x4 (clock64 around 1024 steps; each
//   measurement printed twice);
// - what one SM takes in: each block (one per SM: 160 KB of shared memory) copies 64 KB of its own from L2 into
//   shared memory 16 times with cp.async (every copy of a pass in flight), with a block on every SM and on 8 SMs; and
//   the same 1 MB read from a neighbour block's shared memory in a cluster of 4 (distributed shared memory,
//   ld.shared::cluster). GB/s per SM, %globaltimer around the 16 passes, the mean over the blocks;
// - what a chain of dependent kernels costs (docs/benchmarks.md #19 tenth step: B=1 is ~125 of them): 256 kernels
//   that do nothing but wait for their predecessor, in one CUDA graph, with and without programmatic dependent
//   launch, on 1 block and on one block per SM; and a grid-wide barrier among one block per SM (what a persistent
//   kernel would pay between phases instead), polled by atomic reads and by acquire loads, µs per barrier over 2000.
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda_util.cuh"
#include "kernels/mma.cuh"

using cn::kernels::cuda::cp_async16;
using cn::kernels::cuda::cp_async_wait_all;
using cn::kernels::cuda::pdl_trigger;
using cn::kernels::cuda::pdl_wait;

// The kernels' own m16n8k16 bf16 step (kernels/mma.cuh).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    cn::kernels::cuda::mma16816<__nv_bfloat16>(c, a, b0, b1);
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
__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
constexpr int kIntakeBytes = 64 * 1024, kIntakeReps = 16, kIntakeSmem = 160 * 1024;

__global__ void intake(const uint4* src, unsigned long long* ns) {
    extern __shared__ __align__(16) uint4 buf[];
    constexpr int n = kIntakeBytes / 16;
    const uint4* mine = src + static_cast<size_t>(blockIdx.x) * n;
    __syncthreads();
    const unsigned long long t0 = gtime();
    for (int rep = 0; rep < kIntakeReps; ++rep) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) cp_async16(buf + i, mine + i);
        cp_async_wait_all();
        __syncthreads();
    }
    const unsigned long long t1 = gtime();
    if (threadIdx.x == 0) ns[blockIdx.x] = t1 - t0;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}
__global__ void __cluster_dims__(4, 1, 1) dsmem(unsigned long long* ns, uint4* sink) {
    extern __shared__ __align__(16) uint4 buf[];
    constexpr int n = kIntakeBytes / 16, kBatch = 8;
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = make_uint4(i, blockIdx.x, 0, 0);
    cluster_sync();
    unsigned rank, remote;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(buf));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"((rank + 1) % 4));
    uint4 acc = make_uint4(0, 0, 0, 0);
    const unsigned long long t0 = gtime();
    for (int rep = 0; rep < kIntakeReps; ++rep) {
        for (int i = threadIdx.x; i < n; i += blockDim.x * kBatch) {
            uint4 v[kBatch];
#pragma unroll
            for (int j = 0; j < kBatch; ++j) {
                const int k = i + j * blockDim.x;
                asm volatile("ld.shared::cluster.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w)
                             : "r"(remote + (k < n ? k : 0) * 16));
            }
#pragma unroll
            for (int j = 0; j < kBatch; ++j) acc.x ^= v[j].x, acc.y ^= v[j].y, acc.z ^= v[j].z, acc.w ^= v[j].w;
        }
    }
    __syncthreads();
    const unsigned long long t1 = gtime();
    cluster_sync();  // no block leaves while a neighbour still reads its shared memory
    if (threadIdx.x == 0) ns[blockIdx.x] = t1 - t0;
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// A kernel of a dependent chain (what B=1 is: ~125 kernels each reading its predecessor's output), in the project's
// pattern (kernels/cuda_util.cuh): lets the next kernel start, waits for the previous one (programmatic dependent
// launch), bumps a counter.
__global__ void step(unsigned* counter) {
    pdl_trigger();
    pdl_wait();
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(counter, 1u);
}

// Every block of the grid (all co-resident: a cooperative launch of one per SM) meets at a barrier `rounds` times:
// arrival on an atomic counter, the last arrival bumps the generation the others spin on (what a persistent per-layer
// kernel would do between its phases). Block 0 times the rounds with %globaltimer. LOADS: the waiting blocks poll the
// generation with acquire loads; otherwise with atomic reads (atomicAdd of 0).
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
template <bool LOADS>
__global__ void barriers(unsigned* count, unsigned* gen, int rounds, unsigned long long* ns) {
    const unsigned blocks = gridDim.x;
    __syncthreads();
    const unsigned long long t0 = gtime();
    for (int r = 0; r < rounds; ++r) {
        if (threadIdx.x == 0) {
            const unsigned g = atomicAdd(gen, 0u);
            __threadfence();
            if (atomicAdd(count, 1u) == blocks - 1) {
                atomicExch(count, 0u);
                __threadfence();
                atomicAdd(gen, 1u);
            } else {
                while ((LOADS ? load_acquire(gen) : atomicAdd(gen, 0u)) == g) {}
            }
            __threadfence();
        }
        __syncthreads();
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) *ns = gtime() - t0;
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
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    uint4 *src = nullptr, *sink = nullptr;
    unsigned long long* ns = nullptr;
    if (cudaMalloc(&src, static_cast<size_t>(sms) * kIntakeBytes) != cudaSuccess ||
        cudaMalloc(&sink, sms * 256 * sizeof(uint4)) != cudaSuccess || cudaMalloc(&ns, sms * sizeof(unsigned long long)) != cudaSuccess ||
        cudaFuncSetAttribute(intake, cudaFuncAttributeMaxDynamicSharedMemorySize, kIntakeSmem) != cudaSuccess ||
        cudaFuncSetAttribute(dsmem, cudaFuncAttributeMaxDynamicSharedMemorySize, kIntakeSmem) != cudaSuccess) {
        printf("cn_bench_mma: intake buffers: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    cudaMemset(src, 1, static_cast<size_t>(sms) * kIntakeBytes);
    auto report = [&](const char* what, int blocks) {
        unsigned long long t[1024] = {};
        if (cudaGetLastError() != cudaSuccess ||
            cudaMemcpy(t, ns, blocks * sizeof(unsigned long long), cudaMemcpyDeviceToHost) != cudaSuccess) {
            printf("cn_bench_mma: %s: %s\n", what, cudaGetErrorString(cudaGetLastError()));
            exit(1);
        }
        double sum = 0;
        for (int b = 0; b < blocks; ++b) sum += static_cast<double>(kIntakeBytes) * kIntakeReps / static_cast<double>(t[b]);
        printf("%s, %d blocks: %.1f GB/s per SM\n", what, blocks, sum / blocks);
    };
    const int four = sms / 4 * 4;
    for (int rep = 0; rep < 2; ++rep) {
        for (int blocks : {sms, 8}) {
            intake<<<blocks, 256, kIntakeSmem>>>(src, ns);  // the first pass brings the slices into L2
            intake<<<blocks, 256, kIntakeSmem>>>(src, ns);
            report("cp.async from L2 into shared memory", blocks);
        }
        dsmem<<<four, 256, kIntakeSmem>>>(ns, sink);
        report("distributed shared memory, a neighbour's in a cluster of 4", four);
    }
    // A chain of 256 dependent kernels in one CUDA graph, with and without PDL: µs per kernel (the second replay).
    unsigned* counter = nullptr;
    cudaStream_t stream = nullptr;
    if (cudaMalloc(&counter, 2 * sizeof(unsigned)) != cudaSuccess ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        printf("cn_bench_mma: chain buffers: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    constexpr int kChain = 256;
    for (int rep = 0; rep < 2; ++rep) {
        for (int blocks : {1, sms}) {
            for (int pdl : {0, 1}) {
                cudaLaunchAttribute attr{};
                attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
                attr.val.programmaticStreamSerializationAllowed = 1;
                cudaLaunchConfig_t cfg{};
                cfg.gridDim = dim3(blocks);
                cfg.blockDim = dim3(128);
                cfg.stream = stream;
                cfg.attrs = &attr;
                cfg.numAttrs = pdl;
                cudaGraph_t graph = nullptr;
                cudaGraphExec_t exec = nullptr;
                cudaEvent_t a = nullptr, b = nullptr;
                float ms = 0;
                bool ok = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
                for (int i = 0; ok && i < kChain; ++i) ok = cudaLaunchKernelEx(&cfg, step, counter) == cudaSuccess;
                ok = cudaStreamEndCapture(stream, &graph) == cudaSuccess && ok;
                ok = ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess && cudaEventCreate(&a) == cudaSuccess &&
                     cudaEventCreate(&b) == cudaSuccess && cudaGraphLaunch(exec, stream) == cudaSuccess &&
                     cudaEventRecord(a, stream) == cudaSuccess && cudaGraphLaunch(exec, stream) == cudaSuccess &&
                     cudaEventRecord(b, stream) == cudaSuccess && cudaEventSynchronize(b) == cudaSuccess &&
                     cudaEventElapsedTime(&ms, a, b) == cudaSuccess;
                if (!ok) {
                    printf("cn_bench_mma: kernel chain: %s\n", cudaGetErrorString(cudaGetLastError()));
                    return 1;
                }
                printf("chain of %d dependent kernels in a CUDA graph, %d blocks of 128, PDL %s: %.2f us per kernel\n", kChain, blocks,
                       pdl ? "on" : "off", ms * 1000.0f / kChain);
                cudaEventDestroy(a);
                cudaEventDestroy(b);
                cudaGraphExecDestroy(exec);
                cudaGraphDestroy(graph);
            }
        }
    }
    // A grid-wide barrier among one block per SM: µs per barrier over 2000 rounds.
    for (int rep = 0; rep < 4; ++rep) {
        const bool loads = rep % 2 == 1;
        cudaMemset(counter, 0, 2 * sizeof(unsigned));
        constexpr int kRounds = 2000;
        int rounds = kRounds;
        unsigned* gen = counter + 1;
        void* args[] = {&counter, &gen, &rounds, &ns};
        // Cooperative: every block resident at once, or the launch fails (no deadlock).
        const cudaError_t e =
            cudaLaunchCooperativeKernel(loads ? reinterpret_cast<void*>(barriers<true>) : reinterpret_cast<void*>(barriers<false>),
                                        dim3(sms), dim3(128), args, 0, nullptr);
        unsigned long long t = 0;
        const cudaError_t copied = e == cudaSuccess ? cudaMemcpy(&t, ns, sizeof(t), cudaMemcpyDeviceToHost) : e;
        if (copied != cudaSuccess) {
            printf("cn_bench_mma: barrier: %s\n", cudaGetErrorString(copied));
            return 1;
        }
        printf("grid barrier (atomic counter, polled by %s, %d blocks of 128, one per SM): %.2f us per barrier\n",
               loads ? "acquire loads" : "atomic reads", sms, t / 1000.0 / kRounds);
    }
    return 0;
}
