// The summation order of ATen's CPU fp32 sum / nansum over one contiguous row, as torch 2.11's AVX2 build
// runs it (aten/src/ATen/native/cpu/SumKernel.cpp: cascade_sum -> vectorized_inner_sum -> row_sum ->
// multi_row_sum, with Vectorized<float> of 8 lanes). Host and device code share it, so every path that
// re-derives a statistic the reference computes with torch.nanmean / torch.sum gets the same bits on any
// processor and on CUDA: a constant series sums to what the reference's sum gives, not to the exact value,
// and takes the same branch (scale 0 -> eps, or a tiny non-zero scale) as the reference.
//
// The reference sums in this order on every x86-64 processor with AVX2, AVX-512 ones included: SumKernel.cpp
// registers its kernels with REGISTER_DISPATCH, which gives AVX-512 hosts the AVX2 build. cutenative sums in
// this order on every host (ARM and CUDA included); tests/kernels checks it against ATen's nansum bit for bit.
//
// The order, for a row x[0..n) (NaN loads as 0 in nansum; `load(i)` below returns the value to add):
//   n < 8:  ATen's scalar row_sum: four slots k = 0..3, slot k sums x[4i + k] for i < n / 4 (the cascade
//           below); the leftovers x[4 (n/4) ..] are added to slot 0 one by one; then
//           s = ((slot0 + slot1) + slot2) + slot3.
//   n >= 8: 32 slots t = 8k + l (ILP row k = 0..3, lane l = 0..7); slot t sums x[32i + t] for i < n / 32 with
//           the cascade below; the leftover whole vectors (n / 8 - 4 (n / 32) of them, r = 0, 1, 2) are added
//           lane-wise to slots 0..7 (x[32 (n / 32) + 8r + l]); then lane l = ((s_l + s_{8+l}) + s_{16+l}) +
//           s_{24+l}; then s = 0, the tail x[8 (n / 8) ..] added one by one, then lanes 0..7 added in order.
//   The stored result is 0 + s.
//   Cascade over m items v_0..v_{m-1} (multi_row_sum, 4 levels): step = 2^max(4, ceil_log2(m) / 4); the items
//   are added to level 0 in runs of `step`; after each full run level j-1 is added into level j and cleared, for
//   j = 1, 2, 3, stopping at the first j whose digit of the run count (base `step`) is non-zero; items past the
//   last full run go to level 0; finally level 0 += level 1, += level 2, += level 3.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CN_HD __host__ __device__ __forceinline__
#else
#define CN_HD inline
#endif

namespace cn::kernels::aten_sum {

constexpr int64_t kLanes = 8;  // Vectorized<float>::size() in ATen's AVX2 kernels
constexpr int64_t kIlp = 4;    // row_sum's ilp_factor
constexpr int64_t kSlots = kLanes * kIlp;
constexpr int64_t kLevels = 4;  // multi_row_sum's num_levels

// at::native::utils::CeilLog2.
CN_HD int64_t ceil_log2(int64_t x) {
    if (x <= 2) return 1;
    uint64_t v = static_cast<uint64_t>(x) - 1;
    int64_t last = -1;
    while (v != 0) {
        v >>= 1;
        ++last;
    }
    return last + 1;
}

// multi_row_sum's cascade for one slot over items 0..m-1; load(i) gives item i.
template <class Load>
CN_HD float cascade(const Load& load, int64_t m) {
    const int64_t lp = ceil_log2(m) / kLevels > 4 ? ceil_log2(m) / kLevels : 4;
    const int64_t step = int64_t{1} << lp, mask = step - 1;
    float acc[kLevels] = {0.f, 0.f, 0.f, 0.f};
    int64_t i = 0;
    while (i + step <= m) {
        for (int64_t j = 0; j < step; ++j, ++i) acc[0] += load(i);
        for (int64_t j = 1; j < kLevels; ++j) {
            acc[j] += acc[j - 1];
            acc[j - 1] = 0.f;
            if ((i & (mask << (j * lp))) != 0) break;
        }
    }
    for (; i < m; ++i) acc[0] += load(i);
    for (int64_t j = 1; j < kLevels; ++j) acc[0] += acc[j];
    return acc[0];
}

// The whole row in one thread. value(i) gives the i-th item as the reduction sees it (NaN already mapped to
// 0 for nansum).
template <class Value>
CN_HD float row_sum(const Value& value, int64_t n) {
    if (n < kLanes) {
        const int64_t m = n / kIlp;
        float s[kIlp];
        for (int64_t k = 0; k < kIlp; ++k) s[k] = cascade([&](int64_t i) { return value(kIlp * i + k); }, m);
        for (int64_t i = kIlp * m; i < n; ++i) s[0] += value(i);
        float r = s[0];
        for (int64_t k = 1; k < kIlp; ++k) r += s[k];
        return 0.f + r;
    }
    const int64_t vecs = n / kLanes, m = vecs / kIlp;
    float s[kSlots];
    for (int64_t t = 0; t < kSlots; ++t) s[t] = cascade([&](int64_t i) { return value(kSlots * i + t); }, m);
    for (int64_t r = 0; r < vecs - kIlp * m; ++r) {
        for (int64_t l = 0; l < kLanes; ++l) s[l] += value(kSlots * m + kLanes * r + l);
    }
    for (int64_t k = 1; k < kIlp; ++k) {
        for (int64_t l = 0; l < kLanes; ++l) s[l] += s[kLanes * k + l];
    }
    float f = 0.f;
    for (int64_t i = kLanes * vecs; i < n; ++i) f += value(i);
    for (int64_t l = 0; l < kLanes; ++l) f += s[l];
    return 0.f + f;
}

}  // namespace cn::kernels::aten_sum
