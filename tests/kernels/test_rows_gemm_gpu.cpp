// GPU (ctest label "gpu"): kernels/rows_gemm.h. Every output row is bit-identical whatever the number of rows in
// the call (the same rows computed in calls of 1, 34, 36, 68, 74, 550, 2176, 8708 and 34,822 rows, at different offsets: every
// row-count tier of both dtypes), and close to an fp64 reference (f32: fp32 products and sums, no TF32; bf16: fp32 accumulation,
// one rounding). The Chronos-2 base shapes (K 48 / 768 / 3072, N 768 / 2304 / 3072), with and without bias, with and
// without the ReLU epilogue.
// Skips without CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/max.h>
#include <ATen/ops/randn.h>

#ifdef CN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "kernels/rows_gemm.h"
#include "kernels/rows_gemm_mma.h"
#endif

namespace {

TEST(RowsGemmGpu, RowsAreBitIdenticalForEveryRowCountAndCloseToFp64) {
#ifndef CN_WITH_CUDA
    GTEST_SKIP() << "SKIPPED: built without CUDA";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    struct Shape {
        int64_t N, K;
        bool bias, relu;
    };
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
        for (const Shape& s :
             {Shape{768, 768, false, false}, Shape{2304, 768, false, false}, Shape{3072, 768, false, false}, Shape{768, 3072, false, false},
              Shape{256, 768, true, false}, Shape{96, 40, true, false}, Shape{3072, 768, false, true}, Shape{3072, 48, true, true}}) {
            SCOPED_TRACE(std::string(c10::toString(dtype)) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K) +
                         (s.relu ? " relu" : ""));
            at::manual_seed(1);
            const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
            const at::Tensor w = (at::randn({s.N, s.K}, opts.dtype(at::kFloat)) / std::sqrt(static_cast<double>(s.K))).to(dtype);
            const at::Tensor b = s.bias ? at::randn({s.N}, opts.dtype(at::kFloat)).to(dtype) : at::Tensor();
            const at::Tensor rows = at::randn({34, s.K}, opts.dtype(at::kFloat)).to(dtype);  // the rows under test
            const at::Tensor alone = cn::kernels::rows_gemm(rows, w, b, s.relu).cpu();
            std::printf("  %s\n", cn::kernels::rows_gemm_config(w, s.bias, s.relu).c_str());
            for (int64_t before :
                 {int64_t{0}, int64_t{1}, int64_t{34}, int64_t{34 * 15}, int64_t{34 * 63}, int64_t{34 * 255}, int64_t{34 * 1023}}) {
                const at::Tensor pre = at::randn({before, s.K}, opts.dtype(at::kFloat)).to(dtype);
                const at::Tensor post = at::randn({before % 7, s.K}, opts.dtype(at::kFloat)).to(dtype);
                const at::Tensor x = at::cat({pre, rows, post}, 0);
                const at::Tensor got = cn::kernels::rows_gemm(x, w, b, s.relu).slice(0, before, before + 34).cpu();
                EXPECT_EQ(std::memcmp(got.const_data_ptr(), alone.const_data_ptr(), alone.nbytes()), 0) << before << " rows before";
            }
            // One row alone, and a 3-D input with series along dim 1.
            EXPECT_EQ(std::memcmp(cn::kernels::rows_gemm(rows.slice(0, 5, 6), w, b, s.relu).cpu().const_data_ptr(),
                                  alone[5].const_data_ptr(), alone[5].nbytes()),
                      0);
            const at::Tensor three = at::cat({rows.unsqueeze(1), rows.unsqueeze(1)}, 1);  // [34, 2, K]
            EXPECT_EQ(std::memcmp(cn::kernels::rows_gemm(three, w, b, s.relu).select(1, 1).contiguous().cpu().const_data_ptr(),
                                  alone.const_data_ptr(), alone.nbytes()),
                      0);
            // Against fp64.
            at::Tensor ref = at::matmul(rows.to(at::kDouble), w.to(at::kDouble).t());
            if (s.bias) ref = ref + b.to(at::kDouble);
            if (s.relu) ref = ref.clamp_min(0.0);
            const double err = (alone.to(at::kDouble) - ref.cpu()).abs().max().item<double>();
            const double scale = ref.abs().max().item<double>();
            EXPECT_LT(err, (dtype == at::kFloat ? 1e-5 : 1e-2) * scale) << "max abs error " << err;
        }
    }
#endif
}

// rows_gemm_accumulate (out += x W^T in the epilogue): rows bit-identical for every row count as above; f32
// bit-identical to out + rows_gemm(x, w) (the add the fused pass made before); bf16 within one bf16 step of it (on the
// H100 cuBLASLt's bf16 epilogue rounds the product to bf16 before adding C, as the separate add does: the number of
// elements that differ is printed).
TEST(RowsGemmGpu, AccumulateIsBatchInvariantAndMatchesTheSeparateAdd) {
#ifndef CN_WITH_CUDA
    GTEST_SKIP() << "SKIPPED: built without CUDA";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
        for (const auto& [N, K] : {std::pair<int64_t, int64_t>{768, 768}, {768, 3072}}) {
            SCOPED_TRACE(std::string(c10::toString(dtype)) + " N " + std::to_string(N) + " K " + std::to_string(K));
            at::manual_seed(2);
            const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
            const at::Tensor w = (at::randn({N, K}, opts.dtype(at::kFloat)) / std::sqrt(static_cast<double>(K))).to(dtype);
            const at::Tensor rows = at::randn({34, K}, opts.dtype(at::kFloat)).to(dtype);
            const at::Tensor c = at::randn({34, N}, opts.dtype(at::kFloat)).to(dtype);  // the residual
            at::Tensor alone = c.clone();
            cn::kernels::rows_gemm_accumulate(rows, w, alone);
            alone = alone.cpu();
            std::printf("  accumulate: %s\n", cn::kernels::rows_gemm_config(w, false, false, true).c_str());
            // Calls of 34, 35, 102, 544, 1122, 2176, 4114, 8704 and 34816 rows: every tier, inside and at its probe size.
            for (int64_t before : {int64_t{0}, int64_t{1}, int64_t{68}, int64_t{34 * 15}, int64_t{34 * 32}, int64_t{34 * 63},
                                   int64_t{34 * 120}, int64_t{34 * 255}, int64_t{34 * 1023}}) {
                const at::Tensor x = at::cat({at::randn({before, K}, opts.dtype(at::kFloat)).to(dtype), rows}, 0);
                at::Tensor out = at::cat({at::randn({before, N}, opts.dtype(at::kFloat)).to(dtype), c}, 0);
                cn::kernels::rows_gemm_accumulate(x, w, out);
                const at::Tensor got = out.slice(0, before).cpu();
                EXPECT_EQ(std::memcmp(got.const_data_ptr(), alone.const_data_ptr(), alone.nbytes()), 0) << before << " rows before";
            }
            const at::Tensor two = (c + cn::kernels::rows_gemm(rows, w)).cpu();
            if (dtype == at::kFloat) {
                EXPECT_EQ(std::memcmp(two.const_data_ptr(), alone.const_data_ptr(), alone.nbytes()), 0);
            } else {
                const at::Tensor differ = alone.view(at::kShort) != two.view(at::kShort);
                std::printf("  bf16 accumulate against the separate add: %lld of %lld elements differ\n",
                            static_cast<long long>(differ.sum().item<int64_t>()), static_cast<long long>(differ.numel()));
                // One bf16 step (2^-7 relative to the larger of the two, at least 2^-7 * 1e-3).
                const at::Tensor a = alone.to(at::kDouble), t = two.to(at::kDouble);
                const at::Tensor step = at::max(a.abs(), t.abs()).clamp_min(1e-3) * (1.0 / 128.0);
                EXPECT_TRUE(((a - t).abs() <= step).all().item<bool>())
                    << "max difference / step " << ((a - t).abs() / step).max().item<double>();
            }
        }
    }
#endif
}

// rows_gemm's own small-call kernels (kernels/rows_gemm_mma.h) called directly, each variant (8, 16, 32 columns per block):
// calls of 1, 7, 16, 17, 34, 68 and 80 rows (one to five tiles of 16 rows, partial tiles), N not a multiple of 16, K of one
// mma step, of a partial x stage (400 = 256 + 144) and of 12 stages (3072); with bias, ReLU and the accumulate epilogue.
// Each row bit-identical whatever the call's row count (by construction: nothing is shared between rows), the variants
// bit-identical to each other (the same chain of mma steps), close to fp64, and the rounded accumulate equal to the
// separate add. Whether their bits equal the cuBLASLt base configuration's (the condition for rows_gemm to use them) is
// printed, not asserted: rows_gemm checks it on its probe and keeps the base where they differ.
TEST(RowsGemmGpu, OwnSmallCallKernelIsRowInvariantAndCloseToFp64) {
#ifndef CN_WITH_CUDA
    GTEST_SKIP() << "SKIPPED: built without CUDA";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    using cn::kernels::rows_gemm_detail::MmaAdd;
    struct Shape {
        int64_t N, K;
        bool bias, relu;
        MmaAdd add;
    };
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
    int device = 0, smem_optin = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), cudaSuccess);
    for (auto dtype : {at::kBFloat16, at::kHalf}) {
        for (const Shape& s : {Shape{768, 768, false, false, MmaAdd::kNone}, Shape{2304, 768, false, false, MmaAdd::kNone},
                               Shape{768, 3072, false, false, MmaAdd::kNone}, Shape{3072, 768, false, true, MmaAdd::kNone},
                               Shape{3072, 48, true, true, MmaAdd::kNone}, Shape{24, 16, true, false, MmaAdd::kNone},
                               Shape{336, 3072, true, false, MmaAdd::kNone}, Shape{40, 400, true, false, MmaAdd::kNone},
                               Shape{768, 768, false, false, MmaAdd::kAddRounded}, Shape{768, 3072, false, false, MmaAdd::kAddRounded}}) {
            SCOPED_TRACE(std::string(c10::toString(dtype)) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K) +
                         (s.bias ? " bias" : "") + (s.relu ? " relu" : "") + " add " + std::to_string(static_cast<int>(s.add)));
            at::manual_seed(3);
            const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
            const at::Tensor w = (at::randn({s.N, s.K}, opts.dtype(at::kFloat)) / std::sqrt(static_cast<double>(s.K))).to(dtype);
            const at::Tensor b = s.bias ? at::randn({s.N}, opts.dtype(at::kFloat)).to(dtype) : at::Tensor();
            const at::Tensor x = at::randn({80, s.K}, opts.dtype(at::kFloat)).to(dtype);
            const at::Tensor c = at::randn({80, s.N}, opts.dtype(at::kFloat)).to(dtype);
            at::Tensor first_all;  // the first variant's 80 rows
            for (int cols : cn::kernels::rows_gemm_detail::kMmaColVariants) {
                SCOPED_TRACE(std::to_string(cols) + " columns per block");
                if (!cn::kernels::rows_gemm_detail::mma_takes(dtype, 80, s.N, s.K, cols, x.const_data_ptr(), w.const_data_ptr(),
                                                              c.const_data_ptr())) {
                    // With the H100's 227 KB per block only the widest variant's weight rows outgrow shared memory
                    // here (32 x 3072 x 2 bytes); a device with less may refuse more.
                    if (smem_optin >= 227 * 1024) EXPECT_TRUE(cols == 32 && s.K == 3072);
                    continue;
                }
                auto run = [&](int64_t first, int64_t rows) {
                    at::Tensor out = s.add == MmaAdd::kNone ? at::empty({rows, s.N}, opts) : c.slice(0, first, first + rows).clone();
                    const at::Tensor xs = x.slice(0, first, first + rows).clone();  // contiguous, aligned
                    EXPECT_TRUE(cn::kernels::rows_gemm_detail::mma_takes(dtype, rows, s.N, s.K, cols, xs.const_data_ptr(),
                                                                         w.const_data_ptr(), out.const_data_ptr()));
                    cn::kernels::rows_gemm_detail::mma_gemm(dtype, xs.const_data_ptr(), w.const_data_ptr(),
                                                            b.defined() ? b.const_data_ptr() : nullptr, out.data_ptr(), rows, s.N, s.K,
                                                            s.relu, s.add, cols, stream);
                    return out.cpu();
                };
                const at::Tensor all = run(0, 80);
                if (!first_all.defined()) {
                    first_all = all;
                } else {
                    EXPECT_EQ(std::memcmp(all.const_data_ptr(), first_all.const_data_ptr(), all.nbytes()), 0) << "the variants differ";
                }
                for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{17}, int64_t{34}, int64_t{68}}) {
                    for (int64_t first : {int64_t{0}, int64_t{80} - rows}) {
                        const at::Tensor got = run(first, rows), want = all.slice(0, first, first + rows).contiguous();
                        EXPECT_EQ(std::memcmp(got.const_data_ptr(), want.const_data_ptr(), want.nbytes()), 0)
                            << rows << " rows from " << first;
                    }
                }
                at::Tensor ref = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t());
                if (s.bias) ref = ref + b.to(at::kDouble);
                if (s.relu) ref = ref.clamp_min(0.0);
                if (s.add != MmaAdd::kNone) ref = ref + c.to(at::kDouble);
                const double err = (all.to(at::kDouble) - ref.cpu()).abs().max().item<double>();
                EXPECT_LT(err, 1e-2 * ref.abs().max().item<double>()) << "max abs error " << err;
                if (s.add == MmaAdd::kAddRounded) {  // the separate add: the product rounded, then added in the dtype
                    at::Tensor plain = at::empty({80, s.N}, opts);
                    cn::kernels::rows_gemm_detail::mma_gemm(dtype, x.const_data_ptr(), w.const_data_ptr(), nullptr, plain.data_ptr(), 80,
                                                            s.N, s.K, false, MmaAdd::kNone, cols, stream);
                    const at::Tensor two = (c + plain).cpu();
                    EXPECT_EQ(std::memcmp(two.const_data_ptr(), all.const_data_ptr(), all.nbytes()), 0);
                }
            }
            // Against the cuBLASLt base configuration (rows_gemm on 544 rows, the base's own tier): printed.
            const at::Tensor& all = first_all;
            if (s.add == MmaAdd::kNone) {
                const at::Tensor big = at::cat({x, at::randn({464, s.K}, opts.dtype(at::kFloat)).to(dtype)}, 0);
                const at::Tensor base = cn::kernels::rows_gemm(big, w, b, s.relu).slice(0, 0, 80).cpu();
                const at::Tensor differ = all.view(at::kShort) != base.view(at::kShort);
                std::printf("  own kernel against the cuBLASLt base, %s N %lld K %lld%s%s: %lld of %lld elements differ\n",
                            c10::toString(dtype), static_cast<long long>(s.N), static_cast<long long>(s.K), s.bias ? " bias" : "",
                            s.relu ? " relu" : "", static_cast<long long>(differ.sum().item<int64_t>()),
                            static_cast<long long>(differ.numel()));
            } else {
                at::Tensor base = c.clone();
                cn::kernels::rows_gemm_accumulate(at::cat({x, at::randn({464, s.K}, opts.dtype(at::kFloat)).to(dtype)}, 0).slice(0, 0, 80),
                                                  w, base);
                const at::Tensor differ = all.view(at::kShort) != base.cpu().view(at::kShort);
                std::printf("  own kernel (add %d) against the cuBLASLt base, %s N %lld K %lld: %lld of %lld elements differ\n",
                            static_cast<int>(s.add), c10::toString(dtype), static_cast<long long>(s.N), static_cast<long long>(s.K),
                            static_cast<long long>(differ.sum().item<int64_t>()), static_cast<long long>(differ.numel()));
            }
        }
    }
#endif
}

// rows_gemm_mma.h's measuring tool: the own kernel with K split over a cluster. Every variant gives the same bits,
// a row's output does not depend on the rows around it, the accumulating epilogue is the product rounded then added,
// and all are close to fp64.
TEST(RowsGemmGpu, KSplitMeasuringToolIsRowInvariantAndCloseToFp64) {
#ifndef CN_WITH_CUDA
    GTEST_SKIP() << "SKIPPED: built without CUDA";
#else
    if (!at::hasCUDA()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    namespace rg = cn::kernels::rows_gemm_detail;
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
    const at::ScalarType dtype = at::kBFloat16;
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    for (const auto& [N, K] : {std::pair<int64_t, int64_t>{768, 3072}, {2304, 768}, {40, 128}}) {
        SCOPED_TRACE("N " + std::to_string(N) + " K " + std::to_string(K));
        at::manual_seed(4);
        const at::Tensor w = (at::randn({N, K}, opts.dtype(at::kFloat)) / std::sqrt(static_cast<double>(K))).to(dtype);
        const at::Tensor x = at::randn({68, K}, opts.dtype(at::kFloat)).to(dtype);
        const at::Tensor c = at::randn({68, N}, opts.dtype(at::kFloat)).to(dtype);
        const at::Tensor ref = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t()).cpu();
        for (int split : {2, 4}) {
            at::Tensor first;  // the first variant's 68 rows
            for (int cols : rg::kMmaColVariants) {
                SCOPED_TRACE("split " + std::to_string(split) + ", " + std::to_string(cols) + " columns");
                auto run = [&](int64_t row0, int64_t rows, rg::MmaAdd add) {
                    at::Tensor out = add == rg::MmaAdd::kNone ? at::empty({rows, N}, opts) : c.slice(0, row0, row0 + rows).clone();
                    const at::Tensor xs = x.slice(0, row0, row0 + rows).clone();
                    if (!rg::mma_ksplit_takes(dtype, rows, N, K, cols, split, xs.const_data_ptr(), w.const_data_ptr(),
                                              out.const_data_ptr()))
                        return at::Tensor();
                    rg::mma_gemm_ksplit(dtype, xs.const_data_ptr(), w.const_data_ptr(), out.data_ptr(), rows, N, K, add, cols, split,
                                        stream);
                    return out.cpu();
                };
                const at::Tensor all = run(0, 68, rg::MmaAdd::kNone);
                if (!all.defined()) continue;  // shared memory: a device with less may refuse the widest
                if (!first.defined()) first = all;
                EXPECT_EQ(std::memcmp(all.const_data_ptr(), first.const_data_ptr(), all.nbytes()), 0) << "the variants differ";
                for (const auto& [row0, rows] : {std::pair<int64_t, int64_t>{0, 1}, {5, 17}, {34, 34}}) {
                    const at::Tensor got = run(row0, rows, rg::MmaAdd::kNone);
                    ASSERT_TRUE(got.defined());
                    EXPECT_EQ(
                        std::memcmp(got.const_data_ptr(), all.slice(0, row0, row0 + rows).contiguous().const_data_ptr(), got.nbytes()), 0)
                        << rows << " rows from " << row0;
                }
                const double err = (all.to(at::kDouble) - ref).abs().max().item<double>();
                EXPECT_LT(err, 1e-2 * ref.abs().max().item<double>()) << "max abs error " << err;
                const at::Tensor added = run(0, 68, rg::MmaAdd::kAddRounded), two = (c.cpu() + all).contiguous();
                EXPECT_EQ(std::memcmp(added.const_data_ptr(), two.const_data_ptr(), two.nbytes()), 0) << "the accumulating epilogue";
            }
            EXPECT_TRUE(first.defined()) << "no variant took the operands";
        }
    }
    // What it refuses: f16, a split other than 2 or 4, K not a multiple of 16 x split; and, with the H100's 227 KB per
    // block, only the widest variant split in two at K = 3072 (235,776 bytes).
    int device = 0, smem_optin = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), cudaSuccess);
    const at::Tensor w = at::zeros({768, 3072}, opts), x = at::zeros({68, 3072}, opts), out = at::zeros({68, 768}, opts);
    const void *xp = x.const_data_ptr(), *wp = w.const_data_ptr(), *op = out.const_data_ptr();
    EXPECT_FALSE(rg::mma_ksplit_takes(at::kHalf, 68, 768, 3072, 16, 2, xp, wp, op));
    EXPECT_FALSE(rg::mma_ksplit_takes(dtype, 68, 768, 3072, 16, 3, xp, wp, op));
    EXPECT_FALSE(rg::mma_ksplit_takes(dtype, 68, 768, 48, 16, 2, xp, wp, op));
    if (smem_optin >= 227 * 1024) {
        for (int split : {2, 4}) {
            for (int cols : rg::kMmaColVariants)
                EXPECT_EQ(rg::mma_ksplit_takes(dtype, 68, 768, 3072, cols, split, xp, wp, op), !(split == 2 && cols == 32))
                    << "split " << split << ", " << cols << " columns";
        }
    }
#endif
}

}  // namespace
