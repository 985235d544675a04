// GPU time per call of a piece of work, for the CUDA microbenchmarks (tests/kernels/bench_kernels.cpp,
// tests/bench/bench_gemm_gpu.cpp): `reps` calls captured into one CUDA graph on a pool stream (launch overhead
// out), after 3 uncaptured warm-up calls; CUDA-event time of a replay / reps, median of 15 replays after 3.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace cn::test {

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

inline double graph_us_per_call(const std::function<void()>& fn, int reps) {
    c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
    c10::cuda::CUDAStreamGuard guard(stream);
    for (int i = 0; i < 3; ++i) fn();  // warm-up outside capture (cuBLAS handles, allocator)
    stream.synchronize();
    at::cuda::CUDAGraph g;
    g.capture_begin();
    for (int i = 0; i < reps; ++i) fn();
    g.capture_end();
    std::vector<double> t;
    for (int i = 0; i < 18; ++i) {
        at::cuda::CUDAEvent a(cudaEventDefault), b(cudaEventDefault);
        a.record(stream);
        g.replay();
        b.record(stream);
        b.synchronize();
        if (i >= 3) t.push_back(a.elapsed_time(b) * 1000.0 / reps);
    }
    return median(t);
}

}  // namespace cn::test
