// The CPU paths of cutenative's kernels against fp64 references of their stated semantics
// (tests/kernels/kernel_refs.h), on fresh random inputs of several shapes, odd sizes and NaNs. The same
// checks run on the CUDA paths in test_kernels_gpu.cpp. Tolerances: kernel_refs.h rtol().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/nansum.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros_like.h>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/runtime/cpu_numerics.h"
#include "kernels/cascade_sum.h"
#include "kernels/chronos2_io.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/series_linear.h"
#include "tests/kernels/kernel_refs.h"

using cn::test::expect_close;
using cn::test::rtol;

namespace {

const c10::ScalarType kTypes[] = {at::kFloat, at::kBFloat16, at::kHalf};

}  // namespace

TEST(RmsNormCpu, MatchesFp64Reference) {
    at::manual_seed(1);
    for (auto dt : kTypes) {
        for (auto shape : {std::vector<int64_t>{1, 32}, {3, 7, 48}, {34, 768}, {5, 33}, {2, 1}}) {
            const at::Tensor x = (at::randn(shape, at::kDouble) * 3).to(dt);
            const at::Tensor w = (at::rand({shape.back()}, at::kDouble) + 0.5).to(dt);
            const at::Tensor got = cn::kernels::rms_norm_cpu(x, w, 1e-6);
            const std::string what = std::string(c10::toString(dt)) + " " + c10::str(shape);
            expect_close(got, cn::test::ref_rms_norm(x, w, 1e-6), rtol(dt), 1e-6, what);
            if (dt != at::kFloat) {
                EXPECT_GT(cn::test::share_equal(got, cn::test::ref_rms_norm(x, w, 1e-6)), 0.95) << what;
            }
        }
    }
}

TEST(RmsNormCpu, AddVariantUpdatesTheResidualExactlyAsATen) {
    at::manual_seed(2);
    for (auto dt : kTypes) {
        at::Tensor h = at::randn({9, 40}, at::kFloat).to(dt);
        const at::Tensor d = at::randn({9, 40}, at::kFloat).to(dt);
        const at::Tensor w = at::rand({40}, at::kFloat).to(dt);
        const at::Tensor sum = h + d;  // ATen's rounding of the residual add
        const at::Tensor got = cn::kernels::add_rms_norm_cpu(h, d, w, 1e-6);
        EXPECT_TRUE(at::equal(h, sum)) << c10::toString(dt);
        expect_close(got, cn::test::ref_rms_norm(sum, w, 1e-6), rtol(dt), 1e-6, c10::toString(dt));
    }
}

TEST(RmsNormCpu, RowsAreIndependentOfTheBatch) {
    at::manual_seed(3);
    const at::Tensor x = at::randn({6, 5, 64}, at::kFloat).to(at::kBFloat16);
    const at::Tensor w = at::rand({64}, at::kFloat).to(at::kBFloat16);
    const at::Tensor all = cn::kernels::rms_norm_cpu(x, w, 1e-6);
    for (int64_t i = 0; i < 6; ++i) {
        EXPECT_TRUE(at::equal(all[i], cn::kernels::rms_norm_cpu(x[i].contiguous(), w, 1e-6)));
    }
}

TEST(RmsNormCpu, RefusesMismatchedInputs) {
    const at::Tensor x = at::ones({2, 8});
    EXPECT_THROW(cn::kernels::rms_norm_cpu(x, at::ones({7}), 1e-6), cn::Error);
    EXPECT_THROW(cn::kernels::rms_norm_cpu(x, at::ones({8}, at::kBFloat16), 1e-6), cn::Error);
    EXPECT_THROW(cn::kernels::rms_norm_cpu(x.t(), at::ones({2}), 1e-6), cn::Error);
    at::Tensor h = at::ones({2, 8});
    EXPECT_THROW(cn::kernels::add_rms_norm_cpu(h, at::ones({2, 7}), at::ones({8}), 1e-6), cn::Error);
    EXPECT_THROW(cn::kernels::rms_norm_cpu(at::ones({2, 8}, at::kDouble), at::ones({8}, at::kDouble), 1e-6), cn::Error);
}

TEST(RopeCpu, MatchesFp64ReferenceOnStridedQkvViews) {
    at::manual_seed(4);
    for (auto dt : kTypes) {
        for (auto dims : {std::vector<int64_t>{1, 34, 4, 64}, {3, 17, 2, 8}, {2, 5, 3, 2}}) {
            const int64_t B = dims[0], S = dims[1], H = dims[2], dk = dims[3];
            const at::Tensor inv = 1.0 / at::pow(10000.0, at::arange(0, dk, 2, at::kFloat) / static_cast<double>(dk));
            const at::Tensor qkv = (at::randn({B, S, 3 * H * dk}, at::kFloat) * 2).to(dt);
            const at::Tensor before = qkv.clone();
            const at::Tensor qk = qkv.view({B, S, 3 * H, dk}).slice(2, 0, 2 * H);
            const at::Tensor want = cn::test::ref_rope(qk, inv);
            cn::kernels::rope_cpu_(qk, inv);
            const std::string what = std::string(c10::toString(dt)) + " " + c10::str(dims);
            expect_close(qk, want, rtol(dt), 1e-6, what);
            // The v part is untouched.
            EXPECT_TRUE(at::equal(qkv.view({B, S, 3 * H, dk}).slice(2, 2 * H), before.view({B, S, 3 * H, dk}).slice(2, 2 * H)));
        }
    }
}

TEST(RopeCpu, PositionOffsets) {
    at::manual_seed(6);
    const at::Tensor inv = 1.0 / at::pow(10000.0, at::arange(0, 16, 2, at::kFloat) / 16.0);
    const at::Tensor x = at::randn({2, 3, 4, 16}, at::kFloat);
    const at::Tensor want = cn::test::ref_rope(x, inv, 12);
    const at::Tensor a = x.clone(), b = x.clone();
    cn::kernels::rope_cpu_(a, inv, 12);                              // host offset
    cn::kernels::rope_cpu_(b, inv, 5, at::full({1}, 7, at::kLong));  // host + tensor offset
    expect_close(a, want, rtol(at::kFloat), 1e-6, "pos0");
    EXPECT_TRUE(at::equal(a, b));
}

TEST(RopeCpu, RefusesBadLayouts) {
    const at::Tensor inv = at::ones({4});
    EXPECT_THROW(cn::kernels::rope_cpu_(at::ones({1, 2, 3, 7}), inv), cn::Error);                  // odd dk
    EXPECT_THROW(cn::kernels::rope_cpu_(at::ones({1, 2, 8, 3}).transpose(2, 3), inv), cn::Error);  // last dim strided
    EXPECT_THROW(cn::kernels::rope_cpu_(at::ones({1, 2, 3, 8}), at::ones({3})), cn::Error);        // wrong table
}

TEST(Chronos2PreprocessCpu, MatchesFp64Reference) {
    for (auto dt : kTypes) {
        for (int64_t L : {int64_t{37}, int64_t{64}, int64_t{1}, int64_t{513}}) {
            for (bool arcsinh : {true, false}) {
                for (bool with_future : {false, true}) {
                    cn::kernels::Chronos2PrepParams p;
                    p.patch = 16;
                    p.output_patches = 3;
                    p.time_scale = 512;
                    p.arcsinh = arcsinh;
                    p.dtype = dt;
                    const at::Tensor ctx = cn::test::make_context(6, L, 10 + L);
                    at::Tensor fut;
                    if (with_future) fut = cn::test::make_context(6, 29, 99 + L);  // shorter than N p = 48
                    const auto got = cn::kernels::chronos2_preprocess_cpu(ctx, fut, p);
                    const auto want = cn::test::ref_preprocess(ctx, fut, p);
                    const std::string what = std::string(c10::toString(dt)) + " L=" + std::to_string(L) + (arcsinh ? " asinh" : "") +
                                             (with_future ? " future" : "");
                    EXPECT_EQ(got.context_patches, (L + 15) / 16) << what;
                    // The statistics are the reference's fp32 ones bit for bit (the constant row included).
                    EXPECT_TRUE(at::equal(got.loc.to(at::kDouble), want.loc)) << what;
                    EXPECT_TRUE(at::equal(got.scale.to(at::kDouble), want.scale)) << what;
                    expect_close(got.feats, want.feats, rtol(dt), 1e-5, what + " feats");
                    EXPECT_TRUE(at::equal(got.valid.to(at::kDouble), want.valid)) << what;
                    EXPECT_TRUE(at::equal(got.time_bias.to(at::kDouble), want.time_bias)) << what;
                    // With the REG slot: the same features around a row of zeros at P.
                    cn::kernels::Chronos2PrepParams pr = p;
                    pr.reg_slot = true;
                    const auto slot = cn::kernels::chronos2_preprocess_cpu(ctx, fut, pr);
                    const int64_t P = got.context_patches;
                    ASSERT_EQ(slot.feats.size(1), got.feats.size(1) + 1) << what;
                    EXPECT_TRUE(at::equal(slot.feats.slice(1, 0, P), got.feats.slice(1, 0, P))) << what;
                    EXPECT_TRUE(at::equal(slot.feats.select(1, P), at::zeros_like(got.feats.select(1, 0)))) << what;
                    EXPECT_TRUE(at::equal(slot.feats.slice(1, P + 1), got.feats.slice(1, P))) << what;
                    EXPECT_TRUE(at::equal(slot.valid, got.valid) && at::equal(slot.time_bias, got.time_bias)) << what;
                }
            }
        }
    }
}

// kernels/cascade_sum.h is ATen's CPU nansum order: equal bit for bit to at::nansum on every degenerate row
// (on every x86-64 host: ATen sums with its AVX2 kernel there, AVX-512 ones included).
TEST(CascadeSumCpu, EqualsATenNansumBitForBit) {
    size_t rows = 0;
    for (const auto& r : cn::test::degenerate_rows()) {
        const int64_t n = static_cast<int64_t>(r.size());
        const float want = at::nansum(at::from_blob(const_cast<float*>(r.data()), {1, n}, at::kFloat), -1).item<float>();
        const float got = cn::kernels::aten_sum::row_sum([&](int64_t i) { return std::isnan(r[i]) ? 0.f : r[i]; }, n);
        ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "n=" << n << " row " << rows << ": " << got << " vs " << want;
        ++rows;
    }
    EXPECT_GT(rows, 1000u);
}

// chronos2_instance_stats (the normalisation of every Chronos-2 mode) equals the reference's fp32 InstanceNorm
// statistics bit for bit, row by row and in batches of rows, degenerate rows included.
TEST(Chronos2InstanceStatsCpu, EqualReferenceBitForBit) {
    size_t constant_tiny_scale = 0;
    for (const auto& [n, x] : cn::test::degenerate_batches()) {
        const auto got = cn::kernels::chronos2_instance_stats_cpu(x, 1e-5);
        const auto [loc, scale] = cn::test::ref_instance_stats(x, 1e-5);
        for (int64_t b = 0; b < x.size(0); ++b) {
            const float gl = got.loc[b].item<float>(), wl = loc[b].item<float>();
            const float gs = got.scale[b].item<float>(), ws = scale[b].item<float>();
            ASSERT_EQ(std::memcmp(&gl, &wl, 4), 0) << "n=" << n << " row " << b << " loc " << gl << " vs " << wl;
            ASSERT_EQ(std::memcmp(&gs, &ws, 4), 0) << "n=" << n << " row " << b << " scale " << gs << " vs " << ws;
            const auto one = cn::kernels::chronos2_instance_stats_cpu(x.slice(0, b, b + 1).contiguous(), 1e-5);
            ASSERT_EQ(one.loc.item<float>(), gl);
            ASSERT_EQ(one.scale.item<float>(), gs);
            const at::Tensor row = x[b];
            constant_tiny_scale += row.eq(97.3f).all().item<bool>() && gs != 1e-5f;
        }
    }
    // The case this exists for: constant rows whose fp32 mean is off by an ulp get a tiny non-zero scale.
    EXPECT_GT(constant_tiny_scale, 0u);
}

// The degenerate fixture cases' contexts, padded as the pipeline pads a call (left, with NaN, to the longest
// row; cut to the context length), normalised by chronos2_instance_stats: loc equals the statistics the
// reference itself computed in that run (captured by scripts/make_chronos2_fixtures.py) bit for bit, scale
// within 1 ulp (the reference's sqrt is MKL's, ours IEEE's) and on the same side of the eps branch.
TEST(Chronos2InstanceStatsCpu, EqualTheReferenceRunsOnTheDegenerateFixtures) {
    std::ifstream f(std::string(CN_FIXTURES_DIR) + "/chronos2/cases.json");
    const auto doc = nlohmann::json::parse(f);
    size_t cases = 0, rows = 0, tiny = 0;
    for (const auto& c : doc["cases"]) {
        if (!c.contains("instance_norm")) continue;
        const int64_t ctx = doc["models"][c["model"].get<std::string>()]["chronos_config"]["context_length"];
        std::vector<std::vector<float>> targets;
        for (const auto& t : c["tasks"]) {
            for (const auto& r : t["target"]) {
                std::vector<float> v;
                for (const auto& x : r) v.push_back(x.is_null() ? std::numeric_limits<float>::quiet_NaN() : x.get<float>());
                targets.push_back(std::move(v));
            }
        }
        size_t longest = 0;
        for (const auto& v : targets) longest = std::max(longest, v.size());
        const int64_t L = std::min<int64_t>(static_cast<int64_t>(longest), ctx);
        at::Tensor x = at::full({static_cast<int64_t>(targets.size()), L}, std::numeric_limits<double>::quiet_NaN(), at::kFloat);
        for (size_t b = 0; b < targets.size(); ++b) {
            const auto& v = targets[b];
            const int64_t n = std::min<int64_t>(static_cast<int64_t>(v.size()), L);
            std::copy(v.end() - n, v.end(), x[static_cast<int64_t>(b)].data_ptr<float>() + (L - n));
        }
        const auto got = cn::kernels::chronos2_instance_stats_cpu(x, 1e-5);
        const auto& ref = c["instance_norm"];
        ASSERT_EQ(ref["loc"].size(), targets.size()) << c["name"];
        for (size_t b = 0; b < targets.size(); ++b) {
            const float wl = ref["loc"][b].get<float>(), ws = ref["scale"][b].get<float>();
            const float gl = got.loc[static_cast<int64_t>(b)].item<float>(), gs = got.scale[static_cast<int64_t>(b)].item<float>();
            const std::string what = c["name"].get<std::string>() + " row " + std::to_string(b);
            EXPECT_EQ(std::memcmp(&gl, &wl, 4), 0) << what << ": loc " << gl << " vs the reference's " << wl;
            EXPECT_EQ(gs == 1e-5f, ws == 1e-5f) << what << ": eps branch";
            EXPECT_LE(std::fabs(gs - ws), std::fabs(std::nextafter(ws, INFINITY) - ws)) << what << ": scale " << gs << " vs " << ws;
            tiny += ws != 1e-5f && ws < 1e-4f * std::fabs(wl);
            ++rows;
        }
        ++cases;
    }
    EXPECT_EQ(cases, 20u);
    EXPECT_GT(tiny, 3u) << "constant rows whose reference scale is tiny but not eps: the point of the fixtures";
    std::printf("[ stats    ] %zu degenerate cases, %zu rows: loc bit for bit, scale within 1 ulp\n", cases, rows);
}

// series_linear's bits depend neither on the thread count, nor on the other series of the batch, nor on the
// operands' alignment, at Chronos-2 base's shapes (36 rows per series, 768 -> 3072 and 3072 -> 768) and at
// small ones (where a threaded MKL GEMM, the previous code, gave 1 and 4 threads different bits on AMD EPYC),
// with the series along dim 0 and along dim 1 (there the GEMMs' leading dimensions grow with the batch).
TEST(SeriesLinearCpu, BitsIndependentOfThreadsBatchAndAlignment) {
    const bool cnr = cn::runtime::cpu_numerics().batch_invariant;  // as loading libcutenative sets it
    const int threads = at::get_num_threads();
    at::manual_seed(3);
    const int64_t B = 3;
    struct Shape {
        int64_t R, K, N;
    };
    for (const Shape sh : {Shape{36, 768, 3072}, Shape{36, 3072, 768}, Shape{8, 48, 32}, Shape{17, 64, 32}}) {
        const int64_t R = sh.R, K = sh.K, N = sh.N;
        const std::string shape = std::to_string(R) + "x" + std::to_string(K) + "->" + std::to_string(N);
        const at::Tensor w = at::randn({N, K}) / std::sqrt(static_cast<double>(K)), b = at::randn({N});
        const at::Tensor x = at::randn({B, R, K});
        at::set_num_threads(1);
        const at::Tensor ref = cn::kernels::series_linear(x, w, b, 0);
        for (int t : {2, 4}) {
            at::set_num_threads(t);
            EXPECT_TRUE(at::equal(cn::kernels::series_linear(x, w, b, 0), ref)) << shape << ", " << t << " threads";
        }
        for (int64_t i = 0; i < B; ++i) {
            EXPECT_TRUE(at::equal(cn::kernels::series_linear(x.slice(0, i, i + 1).contiguous(), w, b, 0)[0], ref[i]))
                << shape << ": series " << i << " alone";
        }
        // Series along dim 1 in a wider batch: [R, 5, K] holding x's series at positions 1, 2, 4.
        at::Tensor wide = at::randn({R, 5, K});
        const int64_t at_[] = {1, 2, 4};
        for (int64_t i = 0; i < B; ++i) wide.select(1, at_[i]).copy_(x[i]);
        const at::Tensor y1 = cn::kernels::series_linear(wide, w, b, 1);
        for (int64_t i = 0; i < B; ++i) EXPECT_TRUE(at::equal(y1.select(1, at_[i]), ref[i])) << shape << ": dim 1, series " << i;
        if (cnr) {  // operands one float off their usual alignment
            at::Tensor buf = at::empty({B * R * K + 1});
            const at::Tensor xs = buf.narrow(0, 1, B * R * K).view({B, R, K});
            xs.copy_(x);
            EXPECT_TRUE(at::equal(cn::kernels::series_linear(xs, w, b, 0), ref)) << shape << ": misaligned x";
        }
    }
    at::set_num_threads(threads);
    if (!cnr) GTEST_SKIP() << "MKL ran before its reproducibility mode could be set: alignment not checked";
}

TEST(Chronos2PostprocessCpu, MatchesFp64Reference) {
    at::manual_seed(5);
    for (auto dt : kTypes) {
        for (bool arcsinh : {true, false}) {
            const int64_t B = 4, N = 3, Q = 21, p = 16;
            const at::Tensor head = at::randn({B, N, Q * p}, at::kFloat).to(dt);
            const at::Tensor loc = at::randn({B}, at::kFloat) * 100;
            const at::Tensor scale = at::rand({B}, at::kFloat) * 10 + 1e-3;
            const at::Tensor got = cn::kernels::chronos2_postprocess_cpu(head, loc, scale, Q, p, arcsinh);
            ASSERT_EQ(got.sizes(), (at::IntArrayRef{B, Q, N * p}));
            expect_close(got, cn::test::ref_postprocess(head, loc, scale, Q, p, arcsinh), 1e-6, 1e-4,
                         std::string(c10::toString(dt)) + (arcsinh ? " asinh" : ""));
        }
    }
}
