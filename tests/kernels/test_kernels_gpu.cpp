// GPU (ctest label "gpu"): the CUDA paths of cutenative's kernels against the same fp64 references as the
// CPU tests, with outputs poisoned (NaN) before each launch so an unwritten element fails, vectorised and
// scalar paths (row lengths that are and are not multiples of 16 bytes, misaligned views), odd sizes, NaN
// inputs, and row independence. Skips without CUDA.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/zeros_like.h>

#include "core/common/status.h"
#include "kernels/chronos2_io.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "tests/kernels/kernel_refs.h"

using cn::test::expect_close;
using cn::test::rtol;

#ifdef CN_WITH_CUDA
namespace {

const c10::ScalarType kTypes[] = {at::kFloat, at::kBFloat16, at::kHalf};

at::Tensor poisoned_like(const at::Tensor& t) { return at::full_like(t, std::numeric_limits<double>::quiet_NaN()); }

}  // namespace
#endif

#ifndef CN_WITH_CUDA
TEST(KernelsGpu, Skipped) { GTEST_SKIP() << "built without CUDA kernels"; }
#else

TEST(RmsNormGpu, MatchesFp64Reference) {
    REQUIRE_CUDA();
    at::manual_seed(11);
    for (auto dt : kTypes) {
        for (auto shape : {std::vector<int64_t>{1, 32}, {3, 7, 48}, {34, 768}, {5, 33}, {2, 1}, {4099, 768}, {2, 4104}}) {
            const at::Tensor x = (at::randn(shape, at::kDouble) * 3).to(dt).cuda();
            const at::Tensor w = (at::rand({shape.back()}, at::kDouble) + 0.5).to(dt).cuda();
            const at::Tensor want = cn::test::ref_rms_norm(x, w, 1e-6);
            at::Tensor out = poisoned_like(x);
            cn::kernels::rms_norm_cuda(x, at::Tensor(), at::Tensor(), w, 1e-6, out);
            const std::string what = std::string(c10::toString(dt)) + " " + c10::str(shape);
            expect_close(out, want, rtol(dt), 1e-6, what);
            if (dt != at::kFloat) {
                EXPECT_GT(cn::test::share_equal(out, want), 0.95) << what;
            }
            // CUDA and CPU paths agree to the same tolerance.
            expect_close(out, cn::kernels::rms_norm_cpu(x.cpu(), w.cpu(), 1e-6), rtol(dt), 1e-6, what + " vs cpu");
        }
    }
}

TEST(RmsNormGpu, ScalarPathForMisalignedRows) {
    REQUIRE_CUDA();
    at::manual_seed(12);
    // A view starting one element in: not 16-byte aligned, so the scalar path runs.
    const at::Tensor base = at::randn({1 + 6 * 64}, at::kFloat).to(at::kBFloat16).cuda();
    const at::Tensor x = base.slice(0, 1).view({6, 64});
    const at::Tensor w = at::rand({64}, at::kFloat).to(at::kBFloat16).cuda();
    at::Tensor out = at::empty({1 + 6 * 64}, x.options()).fill_(std::numeric_limits<double>::quiet_NaN()).slice(0, 1).view({6, 64});
    cn::kernels::rms_norm_cuda(x, at::Tensor(), at::Tensor(), w, 1e-6, out);
    expect_close(out, cn::test::ref_rms_norm(x, w, 1e-6), rtol(at::kBFloat16), 1e-6, "misaligned");
}

TEST(RmsNormGpu, AddVariantAndRowIndependence) {
    REQUIRE_CUDA();
    at::manual_seed(13);
    for (auto dt : kTypes) {
        at::Tensor h = at::randn({37, 768}, at::kFloat).to(dt).cuda();
        const at::Tensor d = at::randn({37, 768}, at::kFloat).to(dt).cuda();
        const at::Tensor w = at::rand({768}, at::kFloat).to(dt).cuda();
        const at::Tensor sum = h + d;
        const at::Tensor h0 = h.clone();
        const at::Tensor got = cn::kernels::add_rms_norm(h, d, w, 1e-6);
        EXPECT_TRUE(at::equal(h, sum)) << c10::toString(dt);
        expect_close(got, cn::test::ref_rms_norm(sum, w, 1e-6), rtol(dt), 1e-6, c10::toString(dt));
        for (int64_t r : {0, 5, 36}) {  // one row alone gives the same bits as inside the batch
            at::Tensor hr = h0.slice(0, r, r + 1).clone();
            const at::Tensor one = cn::kernels::add_rms_norm(hr, d.slice(0, r, r + 1).contiguous(), w, 1e-6);
            EXPECT_TRUE(at::equal(one, got.slice(0, r, r + 1))) << c10::toString(dt) << " row " << r;
        }
    }
}

// Calls of 4096 rows or more run one warp per row, smaller calls one block per row, in the same summation order: a
// row gets the same bits in a call of 4100 rows as in one of 1000 or alone, with and without the residual add, for
// row lengths of one to eight warps' work, vector and scalar.
TEST(RmsNormGpu, LargeCallsGiveTheSmallCallsBits) {
    REQUIRE_CUDA();
    at::manual_seed(17);
    for (auto dt : kTypes) {
        for (int64_t D : {int64_t{768}, int64_t{100}, int64_t{64}, int64_t{4096}, int64_t{3000}}) {
            const std::string what = std::string(c10::toString(dt)) + " D=" + std::to_string(D);
            const at::Tensor x = (at::randn({4100, D}, at::kFloat) * 3).to(dt).cuda();
            const at::Tensor d = at::randn({4100, D}, at::kFloat).to(dt).cuda();
            const at::Tensor w = (at::rand({D}, at::kFloat) + 0.5).to(dt).cuda();
            const at::Tensor all = cn::kernels::rms_norm(x, w, 1e-6);
            at::Tensor h_all = x.clone();
            const at::Tensor added = cn::kernels::add_rms_norm(h_all, d, w, 1e-6);
            for (int64_t r0 : {int64_t{0}, int64_t{1000}, int64_t{3100}}) {
                const at::Tensor part = cn::kernels::rms_norm(x.slice(0, r0, r0 + 1000).contiguous(), w, 1e-6);
                EXPECT_TRUE(at::equal(part, all.slice(0, r0, r0 + 1000))) << what << " rows from " << r0;
                at::Tensor h = x.slice(0, r0, r0 + 1000).clone();
                const at::Tensor part_added = cn::kernels::add_rms_norm(h, d.slice(0, r0, r0 + 1000).contiguous(), w, 1e-6);
                EXPECT_TRUE(at::equal(part_added, added.slice(0, r0, r0 + 1000))) << what << " add, rows from " << r0;
                EXPECT_TRUE(at::equal(h, h_all.slice(0, r0, r0 + 1000))) << what << " sum, rows from " << r0;
            }
            const at::Tensor one = cn::kernels::rms_norm(x.slice(0, 4099, 4100).contiguous(), w, 1e-6);
            EXPECT_TRUE(at::equal(one, all.slice(0, 4099, 4100))) << what << " last row alone";
            expect_close(all, cn::test::ref_rms_norm(x, w, 1e-6), rtol(dt), 1e-6, what);
        }
    }
}

TEST(RopeGpu, MatchesFp64ReferenceOnStridedQkvViews) {
    REQUIRE_CUDA();
    at::manual_seed(14);
    for (auto dt : kTypes) {
        for (auto dims : {std::vector<int64_t>{1, 34, 12, 64}, {3, 17, 2, 8}, {2, 5, 3, 2}, {64, 130, 4, 32}}) {
            const int64_t B = dims[0], S = dims[1], H = dims[2], dk = dims[3];
            const at::Tensor inv = (1.0 / at::pow(10000.0, at::arange(0, dk, 2, at::kFloat) / static_cast<double>(dk))).cuda();
            const at::Tensor qkv = (at::randn({B, S, 3 * H * dk}, at::kFloat) * 2).to(dt).cuda();
            const at::Tensor before = qkv.clone();
            const at::Tensor qk = qkv.view({B, S, 3 * H, dk}).slice(2, 0, 2 * H);
            const at::Tensor want = cn::test::ref_rope(qk, inv);
            at::Tensor on_cpu = before.cpu().view({B, S, 3 * H, dk}).slice(2, 0, 2 * H);
            cn::kernels::rope_cpu_(on_cpu, inv.cpu());
            cn::kernels::rope_(qk, inv);
            const std::string what = std::string(c10::toString(dt)) + " " + c10::str(dims);
            expect_close(qk, want, rtol(dt), 1e-6, what);
            expect_close(qk, on_cpu, rtol(dt), 1e-6, what + " vs cpu");
            EXPECT_TRUE(at::equal(qkv.view({B, S, 3 * H, dk}).slice(2, 2 * H), before.view({B, S, 3 * H, dk}).slice(2, 2 * H)));
        }
    }
}

// With a table from rope_table (made once per pass), the same bits as computing cos and sin per element.
TEST(RopeGpu, TableGivesTheSameBits) {
    REQUIRE_CUDA();
    at::manual_seed(15);
    for (auto dt : kTypes) {
        for (auto dims : {std::vector<int64_t>{1, 34, 12, 64}, {3, 17, 2, 8}, {64, 130, 4, 32}}) {
            const int64_t B = dims[0], S = dims[1], H = dims[2], dk = dims[3];
            const at::Tensor inv = (1.0 / at::pow(10000.0, at::arange(0, dk, 2, at::kFloat) / static_cast<double>(dk))).cuda();
            const at::Tensor a = (at::randn({B, S, 3 * H * dk}, at::kFloat) * 2).to(dt).cuda(), b = a.clone();
            cn::kernels::rope_(a.view({B, S, 3 * H, dk}).slice(2, 0, 2 * H), inv);
            cn::kernels::rope_(b.view({B, S, 3 * H, dk}).slice(2, 0, 2 * H), inv, 0, {}, cn::kernels::rope_table(inv, S + 3, dt));
            const at::Tensor x = a.cpu(), y = b.cpu();
            EXPECT_EQ(std::memcmp(x.const_data_ptr(), y.const_data_ptr(), x.nbytes()), 0) << c10::toString(dt) << " " << c10::str(dims);
        }
    }
}

TEST(RopeGpu, DeviceHeldPositionOffset) {
    REQUIRE_CUDA();
    at::manual_seed(16);
    for (auto dt : kTypes) {
        const at::Tensor inv = (1.0 / at::pow(10000.0, at::arange(0, 64, 2, at::kFloat) / 64.0)).cuda();
        const at::Tensor x = at::randn({2, 1, 8, 64}, at::kFloat).to(dt).cuda();
        const at::Tensor y = x.clone();
        cn::kernels::rope_(y, inv, 0, at::full({1}, 37, at::TensorOptions().dtype(at::kLong).device(at::kCUDA)));
        expect_close(y, cn::test::ref_rope(x, inv, 37), rtol(dt), 1e-6, c10::toString(dt));
    }
}

// The CUDA statistics (a warp per row, kernels/cascade_sum.cuh) equal the CPU path bit for bit, and so the
// reference's, on every degenerate row, in batches of equal-length rows and alone; the preprocess kernel's too.
TEST(Chronos2InstanceStatsGpu, EqualCpuBitForBit) {
    REQUIRE_CUDA();
    size_t rows_checked = 0;
    for (const auto& [n, x] : cn::test::degenerate_batches()) {
        const auto cpu = cn::kernels::chronos2_instance_stats_cpu(x, 1e-5);
        const at::Tensor xc = x.cuda();
        const auto gpu = cn::kernels::chronos2_instance_stats(xc, 1e-5);
        ASSERT_TRUE(at::equal(gpu.loc.cpu(), cpu.loc)) << "n=" << n;
        ASSERT_TRUE(at::equal(gpu.scale.cpu(), cpu.scale)) << "n=" << n;
        const auto one = cn::kernels::chronos2_instance_stats(xc.slice(0, 1, 2).contiguous(), 1e-5);
        ASSERT_TRUE(at::equal(one.loc.cpu(), cpu.loc.slice(0, 1, 2))) << "n=" << n;
        ASSERT_TRUE(at::equal(one.scale.cpu(), cpu.scale.slice(0, 1, 2))) << "n=" << n;
        cn::kernels::Chronos2PrepParams p;
        p.patch = 16;
        p.output_patches = 1;
        const auto prep = cn::kernels::chronos2_preprocess(xc, at::Tensor(), p);
        ASSERT_TRUE(at::equal(prep.loc.cpu(), cpu.loc)) << "n=" << n;
        ASSERT_TRUE(at::equal(prep.scale.cpu(), cpu.scale)) << "n=" << n;
        rows_checked += static_cast<size_t>(x.size(0));
    }
    EXPECT_GT(rows_checked, 1000u);
}

TEST(Chronos2PreprocessGpu, MatchesFp64Reference) {
    REQUIRE_CUDA();
    for (auto dt : kTypes) {
        for (int64_t L : {int64_t{37}, int64_t{1}, int64_t{513}, int64_t{8192}}) {
            for (bool with_future : {false, true}) {
                cn::kernels::Chronos2PrepParams p;
                p.patch = 16;
                p.output_patches = 3;
                p.time_scale = 8192;
                p.arcsinh = true;
                p.dtype = dt;
                const at::Tensor ctx = cn::test::make_context(7, L, 20 + L).cuda();
                at::Tensor fut;
                if (with_future) fut = cn::test::make_context(7, 29, 77 + L).cuda();
                const int64_t P = (L + 15) / 16;
                cn::kernels::Chronos2Prep got;
                got.context_patches = P;
                const auto o = ctx.options().dtype(dt);
                got.feats = at::full({7, P + 3, 48}, std::numeric_limits<double>::quiet_NaN(), o);
                got.valid = at::full({7, P + 4}, std::numeric_limits<double>::quiet_NaN(), o);
                got.time_bias = at::full({7, P + 4}, std::numeric_limits<double>::quiet_NaN(), o);
                got.loc = at::full({7}, std::numeric_limits<double>::quiet_NaN(), ctx.options());
                got.scale = at::full({7}, std::numeric_limits<double>::quiet_NaN(), ctx.options());
                cn::kernels::chronos2_preprocess_cuda(ctx, fut, p, got);
                const auto want = cn::test::ref_preprocess(ctx, fut, p);
                const std::string what = std::string(c10::toString(dt)) + " L=" + std::to_string(L) + (with_future ? " future" : "");
                // The reference's fp32 statistics (its CPU summation order) bit for bit, the constant row included.
                EXPECT_TRUE(at::equal(got.loc.cpu().to(at::kDouble), want.loc)) << what;
                EXPECT_TRUE(at::equal(got.scale.cpu().to(at::kDouble), want.scale)) << what;
                expect_close(got.feats, want.feats, rtol(dt), 1e-5, what + " feats");
                EXPECT_TRUE(at::equal(got.valid.cpu().to(at::kDouble), want.valid)) << what;
                EXPECT_TRUE(at::equal(got.time_bias.cpu().to(at::kDouble), want.time_bias)) << what;
                // One row alone gives the same bits.
                const auto one = cn::kernels::chronos2_preprocess(ctx.slice(0, 3, 4).contiguous(),
                                                                  fut.defined() ? fut.slice(0, 3, 4).contiguous() : fut, p);
                EXPECT_TRUE(at::equal(one.feats, got.feats.slice(0, 3, 4))) << what;
                EXPECT_TRUE(at::equal(one.scale, got.scale.slice(0, 3, 4))) << what;
                // With the REG slot: the same features around a row of zeros at P.
                cn::kernels::Chronos2PrepParams pr = p;
                pr.reg_slot = true;
                const auto slot = cn::kernels::chronos2_preprocess(ctx, fut, pr);
                ASSERT_EQ(slot.feats.size(1), P + 4) << what;
                EXPECT_TRUE(at::equal(slot.feats.slice(1, 0, P), got.feats.slice(1, 0, P))) << what;
                EXPECT_TRUE(at::equal(slot.feats.select(1, P), at::zeros_like(got.feats.select(1, 0)))) << what;
                EXPECT_TRUE(at::equal(slot.feats.slice(1, P + 1), got.feats.slice(1, P))) << what;
                EXPECT_TRUE(at::equal(slot.valid, got.valid) && at::equal(slot.time_bias, got.time_bias)) << what;
            }
        }
    }
}

TEST(Chronos2PostprocessGpu, MatchesFp64Reference) {
    REQUIRE_CUDA();
    at::manual_seed(15);
    for (auto dt : kTypes) {
        for (bool arcsinh : {true, false}) {
            const int64_t B = 5, N = 4, Q = 21, p = 16;
            const at::Tensor head = at::randn({B, N, Q * p}, at::kFloat).to(dt).cuda();
            const at::Tensor loc = (at::randn({B}, at::kFloat) * 100).cuda();
            const at::Tensor scale = (at::rand({B}, at::kFloat) * 10 + 1e-3).cuda();
            at::Tensor out = at::full({B, Q, N * p}, std::numeric_limits<double>::quiet_NaN(), loc.options());
            cn::kernels::chronos2_postprocess_cuda(head, loc, scale, Q, p, arcsinh, out);
            const std::string what = std::string(c10::toString(dt)) + (arcsinh ? " asinh" : "");
            expect_close(out, cn::test::ref_postprocess(head, loc, scale, Q, p, arcsinh), 1e-6, 1e-4, what);
            expect_close(out, cn::kernels::chronos2_postprocess_cpu(head.cpu(), loc.cpu(), scale.cpu(), Q, p, arcsinh), 1e-6, 1e-4,
                         what + " vs cpu");
        }
    }
}

#endif
