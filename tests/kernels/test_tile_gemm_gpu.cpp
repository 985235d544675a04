// GPU (ctest label "gpu"): kernels/tile_gemm.h. For every dtype and every tile, the same 34 rows give bit-identical
// outputs whether alone or inside calls of 1 + 34 + 1 ... 34 x 1024 rows (at different offsets), with the tile
// forced or picked by row count; the ReLU epilogue equals ReLU of the plain result; outputs are close to an fp64
// reference (f32: exact fp32 FMAs; bf16/f16: fp32 accumulation, one rounding). Chronos-2 base shapes (K 48 / 768 /
// 3072; N 336 / 768 / 2304 / 3072), with and without bias; a misaligned and a strided input. Skips without CUDA or
// CUTLASS.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>

#include "kernels/tile_gemm.h"

namespace {

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor x = a.contiguous().cpu(), y = b.contiguous().cpu();
    return x.sizes() == y.sizes() && std::memcmp(x.const_data_ptr(), y.const_data_ptr(), x.nbytes()) == 0;
}

TEST(TileGemmGpu, EveryTileGivesTheSameBitsForEveryRowCountAndIsCloseToFp64) {
#ifndef CN_WITH_CUTLASS
    GTEST_SKIP() << "SKIPPED: built without CUDA and CUTLASS";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    struct Shape {
        int64_t N, K;
        bool bias, relu;
    };
    for (auto dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
        for (const Shape& s :
             {Shape{768, 768, false, false}, Shape{2304, 768, false, false}, Shape{3072, 768, false, true}, Shape{768, 3072, false, false},
              Shape{3072, 48, true, true}, Shape{768, 3072, true, false}, Shape{336, 3072, true, false}, Shape{96, 40, true, false}}) {
            SCOPED_TRACE(std::string(c10::toString(dtype)) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K) +
                         (s.bias ? " bias" : "") + (s.relu ? " relu" : ""));
            at::manual_seed(1);
            const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
            const auto f32 = opts.dtype(at::kFloat);
            const at::Tensor w = (at::randn({s.N, s.K}, f32) / std::sqrt(static_cast<double>(s.K))).to(dtype);
            ASSERT_TRUE(cn::kernels::tile_gemm_fits(w));
            const at::Tensor b = s.bias ? at::randn({s.N}, f32).to(dtype) : at::Tensor();
            const at::Tensor rows = at::randn({34, s.K}, f32).to(dtype);  // the rows under test
            const at::Tensor alone = cn::kernels::tile_gemm(rows, w, b, s.relu, 0).cpu();
            for (int tile = -1; tile < 4; ++tile) {
                for (int64_t before : {int64_t{0}, int64_t{1}, int64_t{34}, int64_t{34 * 63}, int64_t{34 * 1023}}) {
                    const at::Tensor pre = at::randn({before, s.K}, f32).to(dtype);
                    const at::Tensor post = at::randn({before % 7, s.K}, f32).to(dtype);
                    const at::Tensor x = at::cat({pre, rows, post}, 0);
                    const at::Tensor got = cn::kernels::tile_gemm(x, w, b, s.relu, tile).slice(0, before, before + 34);
                    EXPECT_TRUE(same_bytes(got, alone)) << "tile " << tile << ", " << before << " rows before";
                }
            }
            // One row alone; a 3-D input with series along dim 1 (strided rows); a misaligned base.
            EXPECT_TRUE(same_bytes(cn::kernels::tile_gemm(rows.slice(0, 5, 6), w, b, s.relu), alone.slice(0, 5, 6)));
            const at::Tensor three = at::cat({rows.unsqueeze(1), rows.unsqueeze(1)}, 1);  // [34, 2, K]
            EXPECT_TRUE(same_bytes(cn::kernels::tile_gemm(three, w, b, s.relu).select(1, 1), alone));
            const at::Tensor shifted = at::cat({rows.flatten().slice(0, 0, 1), rows.flatten()}).slice(0, 1).view({34, s.K});
            EXPECT_TRUE(same_bytes(cn::kernels::tile_gemm(shifted, w, b, s.relu), alone));
            // ReLU in the epilogue = ReLU after (values; a zero's sign aside).
            if (s.relu) EXPECT_TRUE(at::equal(at::relu(cn::kernels::tile_gemm(rows, w, b, false, 0)).cpu(), alone));
            // Against fp64.
            at::Tensor ref = at::matmul(rows.to(at::kDouble), w.to(at::kDouble).t());
            if (s.bias) ref = ref + b.to(at::kDouble);
            if (s.relu) ref = at::relu(ref);
            const double err = (alone.to(at::kDouble) - ref.cpu()).abs().max().item<double>();
            const double scale = ref.abs().max().item<double>();
            EXPECT_LT(err, (dtype == at::kFloat ? 1e-5 : 1e-2) * scale) << "max abs error " << err;
        }
    }
#endif
}

TEST(TileGemmGpu, RefusesWhatItCannotTake) {
#ifndef CN_WITH_CUTLASS
    GTEST_SKIP() << "SKIPPED: built without CUDA and CUTLASS";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
    EXPECT_FALSE(cn::kernels::tile_gemm_fits(at::randn({12, 20}, opts)));      // K not a multiple of 8
    EXPECT_FALSE(cn::kernels::tile_gemm_fits(at::randn({20, 16}, opts)));      // N not a multiple of 8
    EXPECT_FALSE(cn::kernels::tile_gemm_fits(at::randn({16, 32}, opts).t()));  // not contiguous
    EXPECT_FALSE(cn::kernels::tile_gemm_fits(at::randn({16, 16}, opts.device(at::kCPU))));
    EXPECT_TRUE(cn::kernels::tile_gemm_fits(at::randn({12, 20}, opts.dtype(at::kFloat))));  // f32: any shape
    EXPECT_THROW(cn::kernels::tile_gemm(at::randn({3, 16}, opts), at::randn({16, 32}, opts)), std::exception);
#endif
}

}  // namespace
