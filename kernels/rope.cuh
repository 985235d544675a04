// RoPE's device arithmetic, shared by kernels/rope.cu and kernels/rope_attention.cu so that every path rotates with
// the same instructions (kernels/rope.h states the semantics): the rounded (cos, sin) pair of one angle, and the
// rotation of one (x[i], x[i + dk/2]) pair.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda_util.cuh"

namespace cn::kernels::cuda {

// (round_T(cos f), round_T(sin f)) for f = inv_freq_i * pos in fp32.
template <class T>
__device__ __forceinline__ float2 rope_cos_sin(float inv_freq_i, int64_t pos) {
    const float f = inv_freq_i * static_cast<float>(pos);
    return make_float2(round_to<T>(cosf(f)), round_to<T>(sinf(f)));
}

// y1 = x1 c - x2 n, y2 = x2 c + x1 n, rounded to T after every op.
template <class T>
__device__ __forceinline__ void rope_rotate(float x1, float x2, float2 cs, float& y1, float& y2) {
    y1 = round_to<T>(round_to<T>(__fmul_rn(x1, cs.x)) - round_to<T>(__fmul_rn(x2, cs.y)));
    y2 = round_to<T>(round_to<T>(__fmul_rn(x2, cs.x)) + round_to<T>(__fmul_rn(x1, cs.y)));
}

}  // namespace cn::kernels::cuda
