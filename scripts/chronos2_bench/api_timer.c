// A measuring tool for scripts/chronos2_host_timeline.py (issue #19): loaded with LD_PRELOAD into a process that calls
// cutenative on a CUDA device, it records when each of a few CUDA runtime calls began and returned (CLOCK_MONOTONIC,
// the clock of Python's time.monotonic_ns, in microseconds), without a profiler: under torch.profiler's CUPTI callbacks
// cudaGraphLaunch took ~150 us a call at B=1 on the H100 machine, 2.5-6.7 us without (docs/benchmarks.md, #19).
//   gcc -O2 -shared -fPIC -o /tmp/cn_api_timer.so scripts/chronos2_bench/api_timer.c -ldl
//   CN_API_TIMER_OUT=/tmp/events.txt LD_PRELOAD=/tmp/cn_api_timer.so python3 ...
// Recorded, from whichever library calls them through the shared CUDA runtime (libcudart.so, which LibTorch and
// cutenative load): a graph replay (cudaGraphLaunch, 'G'), asynchronous copies (cudaMemcpyAsync: 'H' host to device,
// 'D' device to host, 'M' any other kind) and the waits (cudaEventSynchronize 'E', cudaStreamSynchronize 'S');
// nothing else. The process must hold one shared CUDA runtime (a caller linked with cudart_static is not seen). One
// line per call at exit: "<kind> <began> <returned>". Not thread-safe (the timeline driver calls from one thread); at
// most kMaxEvents calls are kept.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int cuda_status;  // cudaError_t
typedef void* handle;     // cudaGraphExec_t, cudaStream_t, cudaEvent_t

enum {
    kMaxEvents = 400000
};
static struct {
    char kind;
    double began, returned;
} events[kMaxEvents];
static int n_events;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void record(char kind, double began) {
    if (n_events < kMaxEvents) {
        events[n_events].kind = kind;
        events[n_events].began = began;
        events[n_events].returned = now_us();
        ++n_events;
    }
}

// The CUDA runtime's definition of `name`: the next one after this library in the global scope, or, when the runtime
// was loaded without RTLD_GLOBAL (a dependency of a library that ctypes opened, as the timeline driver does), the
// loaded libcudart's own. The process stops if there is none.
static void* next_symbol(const char* name) {
    void* f = dlsym(RTLD_NEXT, name);
    static const char* const runtimes[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    for (size_t i = 0; !f && i < sizeof(runtimes) / sizeof(runtimes[0]); ++i) {
        void* lib = dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD);
        if (lib) f = dlsym(lib, name);
    }
    if (!f) {
        fprintf(stderr, "api_timer: no %s in the loaded CUDA runtime\n", name);
        abort();
    }
    return f;
}

cuda_status cudaGraphLaunch(handle graph_exec, handle stream) {
    static cuda_status (*real)(handle, handle);
    if (!real) real = (cuda_status(*)(handle, handle))next_symbol("cudaGraphLaunch");
    const double t = now_us();
    const cuda_status r = real(graph_exec, stream);
    record('G', t);
    return r;
}

cuda_status cudaEventSynchronize(handle event) {
    static cuda_status (*real)(handle);
    if (!real) real = (cuda_status(*)(handle))next_symbol("cudaEventSynchronize");
    const double t = now_us();
    const cuda_status r = real(event);
    record('E', t);
    return r;
}

cuda_status cudaStreamSynchronize(handle stream) {
    static cuda_status (*real)(handle);
    if (!real) real = (cuda_status(*)(handle))next_symbol("cudaStreamSynchronize");
    const double t = now_us();
    const cuda_status r = real(stream);
    record('S', t);
    return r;
}

// kind: cudaMemcpyKind (1 host to device, 2 device to host).
cuda_status cudaMemcpyAsync(void* dst, const void* src, size_t count, int kind, handle stream) {
    static cuda_status (*real)(void*, const void*, size_t, int, handle);
    if (!real) real = (cuda_status(*)(void*, const void*, size_t, int, handle))next_symbol("cudaMemcpyAsync");
    const double t = now_us();
    const cuda_status r = real(dst, src, count, kind, stream);
    record(kind == 1 ? 'H' : kind == 2 ? 'D' : 'M', t);
    return r;
}

__attribute__((destructor)) static void write_events(void) {
    const char* path = getenv("CN_API_TIMER_OUT");
    if (!path) return;
    FILE* f = fopen(path, "w");
    if (!f) {
        perror("api_timer: CN_API_TIMER_OUT");
        return;
    }
    for (int i = 0; i < n_events; ++i) fprintf(f, "%c %.3f %.3f\n", events[i].kind, events[i].began, events[i].returned);
    fclose(f);
}
