// GPU (ctest label "gpu"): the CUDA non-finite counter against the CPU path on fresh random inputs of
// several shapes and dtypes, including odd sizes and sizes past the grid cap. Skips without CUDA.
#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <ATen/ops/full.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/where.h>

#include "kernels/nonfinite.h"

TEST(NonFiniteGpu, MatchesCpu) {
#ifndef CN_WITH_CUDA
    GTEST_SKIP() << "built without CUDA kernels";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{255}, int64_t{256}, int64_t{1000003}, int64_t{4096 * 256 * 3 + 5}}) {
        for (auto dt : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
            SCOPED_TRACE(std::to_string(n) + " " + c10::toString(dt));
            auto u = at::rand({n}, at::kFloat);
            auto x = at::where(u.lt(0.01), at::full({}, std::numeric_limits<float>::quiet_NaN()), u);
            x = at::where(u.gt(0.995), at::full({}, std::numeric_limits<float>::infinity()), x).to(dt);
            const int64_t expect = cn::kernels::count_nonfinite_cpu(x);
            EXPECT_EQ(cn::kernels::count_nonfinite(x.to(at::kCUDA)), expect);
            // Non-contiguous device input.
            if (n > 2) {
                auto y = x.to(at::kCUDA).slice(0, 0, n, 2);
                EXPECT_EQ(cn::kernels::count_nonfinite(y), cn::kernels::count_nonfinite_cpu(x.slice(0, 0, n, 2)));
            }
        }
    }
#endif
}
