// GPU (ctest label "gpu"): the CUDA paths of the decode-step kernels against fp64 references and against
// their CPU paths, outputs poisoned where the kernel allocates none; the CUDA draw equals at::multinomial's
// with the same CUDA seed. Skips without CUDA.
#include <limits>

#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/round.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/tensor.h>

#include "core/common/status.h"
#include "kernels/kronos_embed.h"
#include "kernels/kv_cache.h"
#include "kernels/rms_norm.h"
#include "kernels/sampling.h"
#include "kernels/skinny_gemm.h"
#include "kernels/swiglu.h"
#include "tests/kernels/decode_refs.h"

using cn::test::expect_close;
using cn::test::rtol;

#ifndef CN_WITH_CUDA
TEST(DecodeKernelsGpu, Skipped) { GTEST_SKIP() << "built without CUDA kernels"; }
#else

TEST(SwigluGpu, MatchesFp64ReferenceAndCpu) {
    REQUIRE_CUDA();
    at::manual_seed(3);
    for (auto dt : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (auto shape : {std::vector<int64_t>{2, 2048}, {5, 6}, {33, 2050}}) {
            const at::Tensor x = (at::randn(shape) * 4).to(dt);
            const at::Tensor got = cn::kernels::swiglu(x.cuda());
            const std::string what = std::string(c10::toString(dt)) + " " + c10::str(shape);
            expect_close(got, cn::test::ref_swiglu(x, dt), dt == at::kFloat ? 4e-7 : rtol(dt), 1e-30, what);
            expect_close(got, cn::kernels::swiglu_cpu(x), dt == at::kFloat ? 4e-7 : rtol(dt), 1e-30, what + " vs cpu");
        }
    }
}

TEST(KvCacheGpu, AppendEqualsCpuPath) {
    REQUIRE_CUDA();
    at::manual_seed(5);
    for (auto dt : {at::kFloat, at::kBFloat16}) {
        const int64_t N = 3, H = 8, M = 40, hd = 64;
        const at::Tensor qkv = at::randn({N, 3, H, hd}).to(dt), inv = at::rand({hd / 2}) * 0.5;
        const at::Tensor kc = at::randn({N, H, M, hd}).to(dt), vc = at::randn({N, H, M, hd}).to(dt);
        for (bool rope : {true, false}) {
            at::Tensor qkv_c = qkv.clone(), kc_c = kc.clone(), vc_c = vc.clone();
            at::Tensor qkv_g = qkv.cuda(), kc_g = kc.cuda(), vc_g = vc.cuda();
            const at::Tensor pc = at::full({1}, 37, at::kLong), pg = pc.cuda();
            const at::Tensor ic = rope ? inv : at::Tensor(), ig = rope ? inv.cuda() : at::Tensor();
            cn::kernels::rope_kv_append_cpu_(rope ? qkv_c.select(1, 0) : at::Tensor(), qkv_c.select(1, 1), qkv_c.select(1, 2), kc_c, vc_c,
                                             pc, ic);
            cn::kernels::rope_kv_append_(rope ? qkv_g.select(1, 0) : at::Tensor(), qkv_g.select(1, 1), qkv_g.select(1, 2), kc_g, vc_g, pg,
                                         ig);
            const std::string what = std::string(c10::toString(dt)) + (rope ? " rope" : " copy");
            expect_close(kc_g, kc_c, rtol(dt), 1e-6, what + " k cache");  // cosf/sinf vs std::cos/sin: an ulp
            EXPECT_TRUE(at::equal(vc_g.cpu(), vc_c)) << what;
            expect_close(qkv_g, qkv_c, rtol(dt), 1e-6, what + " q");
        }
    }
}

TEST(KvCacheGpu, DecodeAttentionMatchesFp64) {
    REQUIRE_CUDA();
    at::manual_seed(7);
    for (auto dt : {at::kFloat, at::kBFloat16}) {
        for (auto [H, hd, M] : {std::tuple<int64_t, int64_t, int64_t>{8, 64, 512}, {4, 128, 80}, {3, 48, 9}, {2, 256, 8192}}) {
            const int64_t N = 2;
            const at::Tensor qkv = at::randn({N, 3, H, hd}).to(dt);  // q as a strided view, like the step's
            const at::Tensor kc = at::randn({N, H, M, hd}).to(dt), vc = at::randn({N, H, M, hd}).to(dt);
            for (int64_t p : {int64_t{0}, M / 2, M - 1}) {
                const at::Tensor got = cn::kernels::decode_attention(qkv.cuda().select(1, 0), kc.cuda(), vc.cuda(),
                                                                     at::full({1}, p, at::kLong).cuda(), 1.0 / std::sqrt(double(hd)));
                const std::string what = std::string(c10::toString(dt)) + " H" + std::to_string(H) + " hd" + std::to_string(hd) + " M" +
                                         std::to_string(M) + " p" + std::to_string(p);
                expect_close(got, cn::test::ref_decode_attention(qkv.select(1, 0), kc, vc, p, 1.0 / std::sqrt(double(hd))),
                             dt == at::kFloat ? 1e-5 : rtol(dt), dt == at::kFloat ? 1e-6 : 1e-2, what);
            }
        }
    }
}

TEST(SamplingGpu, TopPMatchesFp64AndCpu) {
    REQUIRE_CUDA();
    at::manual_seed(9);
    // 100 / 1024 / 2000 / 3000 / 4096: the in-kernel sort (1, 2 or 4 entries per thread, padded or not); 5000:
    // at::sort, then the filter kernel.
    // "ties": values on a 0.5 grid, so many are equal and the sort's order among them matters.
    for (int64_t V : {1024, 100, 2000, 3000, 4096, 5000}) {
        for (bool ties : {false, true}) {
            for (double top_p : {0.9, 0.5, 0.999}) {
                at::Tensor logits = at::randn({5, V}) * 3;
                if (ties) logits = (logits * 2).round() / 2;
                std::vector<int64_t> kept;
                const at::Tensor want = cn::test::ref_top_p(logits, top_p, &kept);
                const at::Tensor got = cn::kernels::top_p_probs(logits.cuda(), top_p).cpu();
                const std::string what = "V " + std::to_string(V) + (ties ? " ties" : "") + " top_p " + std::to_string(top_p);
                const at::Tensor aten = cn::kernels::top_p_probs_cpu(logits.cuda(), top_p);
                if (top_p > 0.99) {
                    // The boundary entries of a 0.999 cut hold ~1e-6 of the mass, within the rounding of an fp32
                    // cumulative sum over thousands of entries: the kept set may differ by such an entry. Check
                    // the distributions instead (total variation per row).
                    for (const at::Tensor& other : {want.to(at::kFloat), aten.cpu()}) {
                        const at::Tensor tv = (got - other).abs().sum(-1);
                        EXPECT_LE(tv.max().item<double>(), 2e-5) << what;
                    }
                    continue;
                }
                expect_close(got, want, 1e-5, 1e-9, what);
                // The ATen composite run on CUDA (the eager path: at::sort there is a stable radix sort, as the
                // kernel's order is); on CPU only without ties, since CPU's at::sort orders equal values otherwise.
                expect_close(got, aten, 1e-5, 1e-9, what + " vs ATen on CUDA");
                if (!ties) expect_close(got, cn::kernels::top_p_probs_cpu(logits, top_p), 1e-5, 1e-9, what + " vs cpu");
                for (int64_t n = 0; n < 5; ++n) EXPECT_EQ((got[n] > 0).sum().item<int64_t>(), kept[n]) << what << " row " << n;
            }
        }
    }
}

// A NaN logit (a broken forward pass) must not leave probabilities unwritten: like the ATen composite, every
// probability of the row is NaN, and the draw then takes index 0, as eager mode's argmax does.
TEST(SamplingGpu, TopPWithNaNWritesEveryEntryLikeATen) {
    REQUIRE_CUDA();
    for (int64_t V : {1024, 2000, 5000}) {
        at::Tensor logits = at::randn({3, V});
        logits[1][7] = std::numeric_limits<float>::quiet_NaN();
        logits[2][V - 1] = std::numeric_limits<float>::quiet_NaN();
        logits[2][3] = std::numeric_limits<float>::quiet_NaN();
        const at::Tensor got = cn::kernels::top_p_probs(logits.cuda(), 0.9).cpu();
        const at::Tensor aten = cn::kernels::top_p_probs_cpu(logits.cuda(), 0.9).cpu();
        for (int64_t n : {1, 2}) {
            EXPECT_TRUE(at::isnan(got[n]).all().item<bool>()) << V << " row " << n;
            EXPECT_TRUE(at::isnan(aten[n]).all().item<bool>()) << V << " row " << n;
        }
        expect_close(got[0], aten[0], 1e-5, 1e-9, "V " + std::to_string(V) + " finite row");
        const at::Tensor tok = cn::kernels::draw_token(got.cuda(), at::ones_like(got).cuda()).cpu();
        EXPECT_EQ(tok[1][0].item<int64_t>(), 0);
        EXPECT_EQ(tok[2][0].item<int64_t>(), 0);
    }
}

TEST(SamplingGpu, DrawEqualsMultinomialWithTheSameSeedAndWritesHistory) {
    REQUIRE_CUDA();
    at::manual_seed(13);
    const at::Tensor probs = at::softmax(at::randn({6, 1024}) * 2, -1).cuda();
    for (uint64_t seed : {1u, 2u, 99u}) {
        auto g1 = at::cuda::detail::createCUDAGenerator(0);
        auto g2 = at::cuda::detail::createCUDAGenerator(0);
        g1.set_current_seed(seed);
        g2.set_current_seed(seed);
        const at::Tensor want = at::multinomial(probs, 1, false, g1);
        const at::Tensor noise = at::empty_like(probs).exponential_(1, g2);
        const at::Tensor got = cn::kernels::draw_token(probs, noise);
        EXPECT_TRUE(at::equal(got, want)) << seed;
        EXPECT_TRUE(at::equal(got.cpu(), cn::kernels::draw_token_cpu(probs.cpu(), noise.cpu()))) << seed;
    }
    // Ties go to the first index, as in argmax; NaN wins; the history gets the token at pos + 1.
    at::Tensor p = at::zeros({3, 300}, at::kFloat);
    p[0][7] = 1, p[0][200] = 1;
    p[1][299] = 1;
    p[2][5] = std::numeric_limits<float>::quiet_NaN(), p[2][9] = 1;
    at::Tensor hist = at::full({3, 4}, -1, at::kLong).cuda();
    const at::Tensor tok = cn::kernels::draw_token(p.cuda(), at::ones_like(p).cuda(), hist, at::full({1}, 1, at::kLong).cuda()).cpu();
    EXPECT_EQ(tok[0][0].item<int64_t>(), 7);
    EXPECT_EQ(tok[1][0].item<int64_t>(), 299);
    EXPECT_EQ(tok[2][0].item<int64_t>(), 5);
    EXPECT_TRUE(at::equal(hist.cpu().select(1, 2), tok.squeeze(1)));
    EXPECT_EQ(hist.cpu().select(1, 3).sum().item<int64_t>(), -3);
}

TEST(KronosEmbedGpu, EqualsCpuPath) {
    REQUIRE_CUDA();
    at::manual_seed(17);
    const int64_t N = 3, L = 6, d = 512;
    const at::Tensor e1 = at::randn({1024, d}), e2 = at::randn({1024, d});
    const at::Tensor h1 = at::randint(1024, {N, L}, at::kLong), h2 = at::randint(1024, {N, L}, at::kLong);
    const at::Tensor pos = at::full({1}, 3, at::kLong);
    const at::Tensor got = cn::kernels::kronos_token_embed(h1.cuda(), h2.cuda(), pos.cuda(), e1.cuda(), e2.cuda(), std::sqrt(512.0));
    EXPECT_TRUE(at::equal(got.cpu(), cn::kernels::kronos_token_embed_cpu(h1, h2, pos, e1, e2, std::sqrt(512.0))));
    cn::kernels::KronosTimeTables t{at::randn({60, d}), at::randn({24, d}), at::randn({7, d}), at::randn({32, d}), at::randn({13, d})};
    cn::kernels::KronosTimeTables tg{t.minute.cuda(), t.hour.cuda(), t.weekday.cuda(), t.day.cuda(), t.month.cuda()};
    at::Tensor stamps = at::zeros({N, L, 5});
    stamps.select(2, 0).fill_(45), stamps.select(2, 1).fill_(13), stamps.select(2, 2).fill_(6), stamps.select(2, 3).fill_(31),
        stamps.select(2, 4).fill_(12);
    at::Tensor x = at::randn({N, d}), xg = x.cuda();
    cn::kernels::kronos_add_time_cpu_(x, stamps, pos, t);
    cn::kernels::kronos_add_time_(xg, stamps.cuda(), pos.cuda(), tg);
    EXPECT_TRUE(at::equal(xg.cpu(), x));
}

TEST(SkinnyGemmGpu, MatchesFp64WithinTheSumsRounding) {
    REQUIRE_CUDA();
    at::manual_seed(21);
    for (auto dt : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{2, 512, 1536},
                               {1, 1024, 512},
                               {3, 8, 7},
                               {8, 512, 2048},
                               {16, 768, 100},
                               {5, 1024, 1024}}) {
            for (bool bias : {true, false}) {
                const at::Tensor x = at::randn({M, K}).to(dt), w = (at::randn({N, K}) * 0.05).to(dt), b = at::randn({N}).to(dt);
                ASSERT_TRUE(cn::kernels::skinny_linear_fits(x.cuda(), w.cuda()));
                at::Tensor out = cn::kernels::skinny_linear_cuda(x.cuda(), w.cuda(), bias ? b.cuda() : at::Tensor()).cpu().to(at::kDouble);
                const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
                at::Tensor ref = at::matmul(xd, wd.t()), mag = at::matmul(xd.abs(), wd.abs().t());
                if (bias) ref = ref + b.to(at::kDouble), mag = mag + b.to(at::kDouble).abs();
                // fp32 sums in another order: a few fp32 ulps of the sum of |products|; then one rounding to T.
                const at::Tensor bound = mag * 4e-6 + ref.abs() * (dt == at::kFloat ? 0.0 : rtol(dt)) + 1e-30;
                const std::string what = std::string(c10::toString(dt)) + " M" + std::to_string(M) + " K" + std::to_string(K) + " N" +
                                         std::to_string(N) + (bias ? " bias" : "");
                EXPECT_EQ(((out - ref).abs() > bound).sum().item<int64_t>(), 0) << what;
            }
        }
    }
    // Shapes it does not take fall back to at::linear.
    EXPECT_FALSE(cn::kernels::skinny_linear_fits(at::randn({17, 64}).cuda(), at::randn({8, 64}).cuda()));
    EXPECT_FALSE(cn::kernels::skinny_linear_fits(at::randn({2, 60}).cuda(), at::randn({8, 60}).cuda()));
    EXPECT_FALSE(
        cn::kernels::skinny_linear_fits(at::randn({129}).cuda().narrow(0, 1, 128).view({2, 64}), at::randn({8, 64}).cuda()));  // misaligned
    const at::Tensor x = at::randn({32, 64}).cuda(), w = at::randn({8, 64}).cuda();
    EXPECT_TRUE(at::allclose(cn::kernels::skinny_linear(x, w, {}), at::linear(x, w)));
}

// The norm before, the residual or SwiGLU after, against the unfused kernels and ATen on CUDA (the composite),
// and the fp32 case against an fp64 reference of the whole chain.
TEST(SkinnyGemmGpu, NormResidualAndSwigluMatchTheUnfusedOps) {
    REQUIRE_CUDA();
    at::manual_seed(23);
    for (auto dt : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (auto [M, K, N] :
             {std::tuple<int64_t, int64_t, int64_t>{2, 512, 1536}, {1, 1024, 512}, {3, 8, 8}, {16, 256, 64}, {5, 512, 2048}, {4, 64, 7}}) {
            for (int mode = 0; mode < 5; ++mode) {                     // 0 norm, 1 norm + residual, 2 norm + swiglu, 3 swiglu, 4 residual
                if (N % 2 != 0 && (mode == 2 || mode == 3)) continue;  // swiglu needs [w1 | w3] halves
                cn::kernels::SkinnyOptions o;
                const at::Tensor x = (at::randn({M, K}) * 2).to(dt).cuda();
                const at::Tensor w = (at::randn({N, K}) * 0.05).to(dt).cuda(), b = at::randn({N}).to(dt).cuda();
                if (mode <= 2) o.norm_weight = (at::rand({K}) + 0.5).to(dt).cuda();
                if (mode == 1 || mode == 4) o.residual = at::randn({M, N}).to(dt).cuda();
                o.swiglu = mode == 2 || mode == 3;
                ASSERT_TRUE(cn::kernels::skinny_linear_fits(x, w));
                const at::Tensor got = cn::kernels::skinny_linear_cuda(x, w, b, o);
                const at::Tensor want = cn::kernels::skinny_linear_composite(x, w, b, o);
                ASSERT_EQ(got.sizes(), want.sizes());
                const std::string what = std::string(c10::toString(dt)) + " M" + std::to_string(M) + " K" + std::to_string(K) + " N" +
                                         std::to_string(N) + " mode " + std::to_string(mode);
                // The GEMM's fp32 sum in another order (and, with the norm, the row variance's and the scale's
                // place): fp32 to ~1e-5 of the result's scale; bf16 / f16 to two of their ulps (a rounding
                // boundary crossed before the last rounding).
                expect_close(got, want, dt == at::kFloat ? 1e-5 : 2 * rtol(dt), dt == at::kFloat ? 1e-5 : 4 * rtol(dt), what);
                if (dt != at::kFloat) continue;
                at::Tensor in = x.cpu().to(at::kDouble);
                if (o.norm_weight.defined()) in = cn::test::ref_rms_norm(in, o.norm_weight.cpu().to(at::kDouble), 1e-5);
                at::Tensor ref = at::matmul(in, w.cpu().to(at::kDouble).t()) + b.cpu().to(at::kDouble);
                if (o.swiglu) ref = cn::test::ref_swiglu(ref, at::kDouble);
                if (o.residual.defined()) ref = ref + o.residual.cpu().to(at::kDouble);
                expect_close(got, ref, 1e-5, 1e-5, what + " vs fp64");
            }
        }
    }
    // Refused combinations take the composite path, which refuses them too.
    const at::Tensor x = at::randn({2, 64}).cuda(), w = at::randn({8, 64}).cuda();
    cn::kernels::SkinnyOptions both;
    both.residual = at::zeros({2, 8}).cuda();
    both.swiglu = true;
    EXPECT_THROW(cn::kernels::skinny_linear(x, w, {}, both), cn::Error);
    // Rows looked up from a table: equal to at::embedding then the GEMM (with the norm too); indices outside
    // the table are clamped by the CUDA path.
    {
        const at::Tensor table = at::randn({50, 64}).cuda(), idx = at::tensor(std::vector<int64_t>{3, 49, 0, 3}).cuda();
        cn::kernels::SkinnyOptions look;
        look.rows = idx;
        ASSERT_TRUE(cn::kernels::skinny_table_fits(table, w, idx));
        expect_close(cn::kernels::skinny_linear_cuda(table, w, {}, look), at::linear(at::embedding(table, idx), w), 1e-5, 1e-5, "rows");
        look.norm_weight = at::rand({64}).cuda() + 0.5;
        expect_close(cn::kernels::skinny_linear_cuda(table, w, {}, look), cn::kernels::skinny_linear_composite(table, w, {}, look), 1e-5,
                     1e-5, "rows + norm");
        cn::kernels::SkinnyOptions out_of_range;
        out_of_range.rows = at::tensor(std::vector<int64_t>{-5, 70}).cuda();
        expect_close(cn::kernels::skinny_linear_cuda(table, w, {}, out_of_range),
                     at::linear(at::embedding(table, at::tensor(std::vector<int64_t>{0, 49}).cuda()), w), 1e-5, 1e-5, "clamped rows");
    }
    // A norm weight off 16-byte alignment is taken by the composite (the CUDA path refuses it).
    cn::kernels::SkinnyOptions off;
    off.norm_weight = at::rand({65}).cuda().narrow(0, 1, 64);
    EXPECT_THROW(cn::kernels::skinny_linear_cuda(x, w, {}, off), cn::Error);
    EXPECT_TRUE(at::equal(cn::kernels::skinny_linear(x, w, {}, off), cn::kernels::skinny_linear_composite(x, w, {}, off)));
}

// One launch (append, then attention) equals the two launches bit for bit: caches, rotated q and the output.
TEST(KvCacheGpu, AttentionWithAppendEqualsAppendThenAttention) {
    REQUIRE_CUDA();
    at::manual_seed(29);
    for (auto dt : {at::kFloat, at::kBFloat16}) {
        for (auto [H, hd, M] : {std::tuple<int64_t, int64_t, int64_t>{8, 64, 512}, {4, 128, 80}, {3, 48, 9}}) {
            const int64_t N = 2;
            for (bool rope : {true, false}) {
                for (int64_t p : {int64_t{0}, M / 2, M - 1}) {
                    const at::Tensor qkv = at::randn({N, 3, H, hd}).to(dt).cuda(), inv = (at::rand({hd / 2}) * 0.5).cuda();
                    const at::Tensor kc = at::randn({N, H, M, hd}).to(dt).cuda(), vc = at::randn({N, H, M, hd}).to(dt).cuda();
                    const at::Tensor pos = at::full({1}, p, at::kLong).cuda();
                    const double scale = 1.0 / std::sqrt(double(hd));
                    at::Tensor qkv1 = qkv.clone(), kc1 = kc.clone(), vc1 = vc.clone();
                    cn::kernels::rope_kv_append_(rope ? qkv1.select(1, 0) : at::Tensor(), qkv1.select(1, 1), qkv1.select(1, 2), kc1, vc1,
                                                 pos, rope ? inv : at::Tensor());
                    const at::Tensor want = cn::kernels::decode_attention(qkv1.select(1, 0), kc1, vc1, pos, scale);
                    at::Tensor qkv2 = qkv.clone(), kc2 = kc.clone(), vc2 = vc.clone();
                    const at::Tensor got = cn::kernels::decode_attention_append(qkv2.select(1, 0), qkv2.select(1, 1), qkv2.select(1, 2),
                                                                                kc2, vc2, pos, rope ? inv : at::Tensor(), scale);
                    const std::string what = std::string(c10::toString(dt)) + " H" + std::to_string(H) + " hd" + std::to_string(hd) + " p" +
                                             std::to_string(p) + (rope ? " rope" : " copy");
                    EXPECT_TRUE(at::equal(got, want)) << what;
                    EXPECT_TRUE(at::equal(kc2, kc1)) << what;
                    EXPECT_TRUE(at::equal(vc2, vc1)) << what;
                    EXPECT_TRUE(at::equal(qkv2, qkv1)) << what;
                    // A NaN key row (a broken forward pass) makes that head's output NaN, as the softmax does.
                    if (p > 0 && rope) {
                        at::Tensor kc4 = kc1.clone();
                        kc4[1][2][p / 2][3] = std::numeric_limits<float>::quiet_NaN();
                        at::Tensor qkv4 = qkv.clone(), vc4 = vc1.clone();
                        const at::Tensor o4 = cn::kernels::decode_attention_append(qkv4.select(1, 0), qkv4.select(1, 1), qkv4.select(1, 2),
                                                                                   kc4, vc4, pos, inv, scale)
                                                  .cpu();
                        EXPECT_TRUE(at::isnan(o4[1].narrow(0, 2 * hd, hd)).all().item<bool>()) << what << " NaN row";
                        EXPECT_FALSE(at::isnan(o4[0]).any().item<bool>()) << what << " other rows";
                        EXPECT_FALSE(at::isnan(o4[1].narrow(0, 0, hd)).any().item<bool>()) << what << " other heads";
                    }
                    // And the CPU composite agrees within the rounding of its sums.
                    at::Tensor qkv3 = qkv.cpu(), kc3 = kc.cpu(), vc3 = vc.cpu();
                    const at::Tensor cpu =
                        cn::kernels::decode_attention_append(qkv3.select(1, 0), qkv3.select(1, 1), qkv3.select(1, 2), kc3, vc3, pos.cpu(),
                                                             rope ? inv.cpu() : at::Tensor(), scale);
                    expect_close(got, cpu, dt == at::kFloat ? 1e-5 : rtol(dt), dt == at::kFloat ? 1e-6 : 1e-2, what + " vs cpu");
                }
            }
        }
    }
}

// The fused top-p + draw: its probabilities are top_p_probs of ATen's CUDA division by the temperature, bit for
// bit, its token the draw from them (noise staged in shared memory up to 2048 entries, read from global memory
// up to 4096); past 4096 it composes. Temperatures whose fp32 reciprocal rounds differently in fp32 and in
// double (1.1, 0.85, 0.55) are among them.
TEST(SamplingGpu, TopPDrawEqualsFilterThenDraw) {
    REQUIRE_CUDA();
    at::manual_seed(31);
    for (int64_t V : {1024, 1000, 2000, 3000, 5000}) {
        for (double temperature : {1.0, 0.7, 1.3, 0.01, 1.1, 0.85, 0.55}) {
            for (double top_p : {0.9, 0.5}) {
                const at::Tensor logits = (at::randn({5, V}) * 3).cuda();
                auto g = at::cuda::detail::createCUDAGenerator(0);
                g.set_current_seed(static_cast<uint64_t>(V) + 7);
                const at::Tensor noise = at::empty_like(logits).exponential_(1, g);
                const at::Tensor want_p = cn::kernels::top_p_probs(logits / temperature, top_p);
                const at::Tensor want = cn::kernels::draw_token(want_p, noise);
                at::Tensor hist = at::full({5, 6}, -1, at::kLong).cuda();
                at::Tensor probs = at::full({5, V}, -1.f).cuda();
                const at::Tensor got =
                    cn::kernels::top_p_draw(logits, temperature, top_p, noise, hist, at::full({1}, 3, at::kLong).cuda(), probs);
                const std::string what = "V " + std::to_string(V) + " T " + std::to_string(temperature) + " top_p " + std::to_string(top_p);
                EXPECT_TRUE(at::equal(probs, want_p)) << what;
                EXPECT_TRUE(at::equal(got, want)) << what;
                EXPECT_TRUE(at::equal(hist.select(1, 4), got.squeeze(1))) << what;
                EXPECT_EQ(hist.cpu().narrow(1, 0, 4).sum().item<int64_t>(), -20) << what;
                EXPECT_TRUE(at::equal(cn::kernels::top_p_draw(logits, temperature, top_p, noise), want)) << what << " (no outputs)";
            }
        }
    }
}

#endif
