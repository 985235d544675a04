// numpy's float32 sums in numpy's own order, for statistics a reference computes with numpy (Kronos'
// KronosPredictor normalises each channel with np.mean / np.std). The order decides branches on degenerate
// data: a constant column whose sum comes out one ulp off has a tiny non-zero std, and the reference then
// normalises it to about -0.43 instead of 0. LibTorch-free, host only; compile without FMA contraction.
//
// Derived from numpy 2.4.6's source (pandas 3.1.1 builds the array); tests/common/test_numpy_sum.cpp checks it
// bit for bit against numpy's outputs (scripts/make_numpy_sum_fixture.py: constant, near-constant, alternating,
// 1e-30 and 1e18 columns of 1 to 20,000 values), and the Kronos fixtures' degenerate cases end to end.
//
//   pairwise_sum (numpy's FLOAT_pairwise_sum, loops_utils.h.src):
//     n < 8:    r = -0.0, then each value added in order
//     n <= 128: eight running sums r[j] of a[8i + j] over the whole blocks of 8, combined as
//               ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the n % 8 leftovers added in order
//     n > 128:  h = n / 2 rounded down to a multiple of 8; pairwise_sum(a, h) + pairwise_sum(a + h, n - h)
//   column_sum: np.add.reduce along a contiguous axis: +0.0 + pairwise_sum(whole column) (no chunking; the
//     array KronosPredictor builds from a DataFrame is column-contiguous, so axis 0 is the contiguous axis)
//   mean = (float)((double)column_sum / n): true_divide by an intp count (fp64 loop, then cast)
//   std  = sqrtf((float)((double)column_sum(((x - mean))^2) / n)), each difference and square rounded to fp32
//   sequential_mean (np.mean over a non-contiguous axis, e.g. the sample paths): +0.0 then each value in
//     order, divided as above.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace cn::numpy {

// a[0], a[stride], ... a[(n - 1) stride]
inline float pairwise_sum(const float* a, int64_t n, int64_t stride) {
    if (n < 8) {
        float r = -0.0f;
        for (int64_t i = 0; i < n; ++i) r += a[i * stride];
        return r;
    }
    if (n <= 128) {
        float r[8];
        for (int64_t j = 0; j < 8; ++j) r[j] = a[j * stride];
        int64_t i = 8;
        for (; i < n - n % 8; i += 8) {
            for (int64_t j = 0; j < 8; ++j) r[j] += a[(i + j) * stride];
        }
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += a[i * stride];
        return res;
    }
    int64_t h = n / 2;
    h -= h % 8;
    return pairwise_sum(a, h, stride) + pairwise_sum(a + h * stride, n - h, stride);
}

inline float column_sum(const float* a, int64_t n, int64_t stride) { return 0.0f + pairwise_sum(a, n, stride); }

inline float divide_by_count(float sum, int64_t n) { return static_cast<float>(static_cast<double>(sum) / static_cast<double>(n)); }

// np.mean(x, axis=0) and np.std(x, axis=0) of one column of a column-contiguous array (n >= 1).
inline void column_mean_std(const float* a, int64_t n, int64_t stride, float& mean, float& stdv) {
    mean = divide_by_count(column_sum(a, n, stride), n);
    // (x - mean)^2 is an array of its own in numpy, summed in the same order.
    std::vector<float> sq(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const float d = a[i * stride] - mean;
        sq[static_cast<size_t>(i)] = d * d;
    }
    stdv = std::sqrt(divide_by_count(column_sum(sq.data(), n, 1), n));
}

// np.mean over an axis numpy reduces sequentially (a non-contiguous axis).
inline float sequential_mean(const float* a, int64_t n, int64_t stride) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += a[i * stride];
    return divide_by_count(s, n);
}

}  // namespace cn::numpy
