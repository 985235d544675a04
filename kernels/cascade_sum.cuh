// kernels/cascade_sum.h on one warp: lane t sums slot t (items x[32i + t], coalesced loads), then the slots
// are combined in the host order through shuffles. Bit-identical to aten_sum::row_sum.
#pragma once

#include "kernels/cascade_sum.h"

namespace cn::kernels::aten_sum {

// Every lane of a full warp calls it with the same n; every lane gets the sum. value(i) as in row_sum (it must
// not contract with the adds: use __fmul_rn & co. inside it).
template <class Value>
__device__ __forceinline__ float warp_row_sum(const Value& value, int64_t n) {
    const unsigned full = 0xffffffffu;
    const int lane = static_cast<int>(threadIdx.x % 32);
    if (n < kLanes) {
        float r = lane == 0 ? row_sum(value, n) : 0.f;
        return __shfl_sync(full, r, 0);
    }
    const int64_t vecs = n / kLanes, m = vecs / kIlp;
    float s = cascade([&](int64_t i) { return value(kSlots * i + lane); }, m);
    if (lane < kLanes) {
        for (int64_t r = 0; r < vecs - kIlp * m; ++r) s += value(kSlots * m + kLanes * r + lane);
    }
    for (int k = 1; k < kIlp; ++k) {
        const float o = __shfl_sync(full, s, (lane + kLanes * k) % 32);
        if (lane < kLanes) s += o;
    }
    float f = 0.f;
    if (lane == 0) {
        for (int64_t i = kLanes * vecs; i < n; ++i) f += value(i);
    }
    for (int l = 0; l < kLanes; ++l) {
        const float o = __shfl_sync(full, s, l);
        if (lane == 0) f += o;
    }
    return __shfl_sync(full, 0.f + f, 0);
}

}  // namespace cn::kernels::aten_sum
