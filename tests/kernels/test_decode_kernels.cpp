// The decode-step kernels' CPU paths (ATen composites) against fp64 references, and the sampling identity the
// graph step relies on: draw_token with exponential_ noise from a seeded generator draws what at::multinomial
// draws with the same seed.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/sort.h>

#include "core/common/status.h"
#include "kernels/kronos_embed.h"
#include "kernels/kv_cache.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"
#include "kernels/swiglu.h"
#include "tests/kernels/decode_refs.h"

using cn::test::expect_close;

// fp32 tolerance 4e-7 relative: the float exp inside silu is itself ~1 ulp off, then two roundings.
TEST(SwigluCpu, MatchesFp64Reference) {
    at::manual_seed(3);
    for (auto shape : {std::vector<int64_t>{2, 2048}, {5, 6}, {1, 2}}) {
        const at::Tensor x = at::randn(shape) * 4;
        expect_close(cn::kernels::swiglu(x), cn::test::ref_swiglu(x, at::kFloat), 4e-7, 1e-30, c10::str(shape));
    }
    // A row-strided view (the fused projection's rows inside a wider buffer).
    const at::Tensor wide = at::randn({3, 20});
    expect_close(cn::kernels::swiglu(wide.narrow(1, 2, 16)), cn::test::ref_swiglu(wide.narrow(1, 2, 16), at::kFloat), 4e-7, 1e-30,
                 "strided");
    EXPECT_THROW(cn::kernels::swiglu(at::randn({2, 5})), cn::Error);
}

TEST(KvCacheCpu, AppendRotatesAtTheDevicePositionAndLeavesOtherRows) {
    at::manual_seed(5);
    const int64_t N = 2, H = 3, M = 7, hd = 8;
    const at::Tensor qkv = at::randn({N, 3, H, hd});
    const at::Tensor inv = at::rand({hd / 2}) * 0.5;
    at::Tensor kc = at::randn({N, H, M, hd}), vc = at::randn({N, H, M, hd});
    const at::Tensor kc0 = kc.clone(), vc0 = vc.clone(), q0 = qkv.select(1, 0).clone();
    const at::Tensor pos = at::full({1}, 4, at::kLong);
    cn::kernels::rope_kv_append_(qkv.select(1, 0), qkv.select(1, 1), qkv.select(1, 2), kc, vc, pos, inv);
    // q and k rotated at position 4 exactly as rope_ does; v copied; the other cache rows untouched.
    at::Tensor qr = q0.clone(), kr = qkv.select(1, 1).clone();
    cn::kernels::rope_(qr.unsqueeze(1), inv, 4);
    cn::kernels::rope_(kr.unsqueeze(1), inv, 4);
    EXPECT_TRUE(at::equal(qkv.select(1, 0), qr));
    EXPECT_TRUE(at::equal(kc.select(2, 4), kr));
    EXPECT_TRUE(at::equal(vc.select(2, 4), qkv.select(1, 2)));
    for (int64_t j : {0, 3, 5, 6}) {
        EXPECT_TRUE(at::equal(kc.select(2, j), kc0.select(2, j))) << j;
        EXPECT_TRUE(at::equal(vc.select(2, j), vc0.select(2, j))) << j;
    }
    // Without RoPE: a plain copy.
    cn::kernels::rope_kv_append_({}, qkv.select(1, 1), qkv.select(1, 2), kc, vc, at::full({1}, 0, at::kLong), {});
    EXPECT_TRUE(at::equal(kc.select(2, 0), qkv.select(1, 1)));
    EXPECT_THROW(cn::kernels::rope_kv_append_(q0, q0, q0, kc, vc, pos, {}), cn::Error);  // q without inv_freq
}

TEST(KvCacheCpu, DecodeAttentionMatchesFp64AndIgnoresRowsAfterPos) {
    at::manual_seed(7);
    const int64_t N = 2, H = 4, M = 33, hd = 16;
    const at::Tensor q = at::randn({N, H, hd});
    at::Tensor kc = at::randn({N, H, M, hd}), vc = at::randn({N, H, M, hd});
    for (int64_t p : {0, 1, 17, 32}) {
        // Rows after p hold garbage that would dominate if read.
        at::Tensor k = kc.clone(), v = vc.clone();
        if (p + 1 < M) {
            k.narrow(2, p + 1, M - p - 1).fill_(1e4);
            v.narrow(2, p + 1, M - p - 1).fill_(1e4);
        }
        const at::Tensor got = cn::kernels::decode_attention(q, k, v, at::full({1}, p, at::kLong), 0.25);
        expect_close(got, cn::test::ref_decode_attention(q, kc, vc, p, 0.25), 1e-5, 1e-6, "p=" + std::to_string(p));
    }
}

TEST(SamplingCpu, TopPMatchesFp64Reference) {
    at::manual_seed(9);
    for (double top_p : {0.9, 0.5, 0.999}) {
        const at::Tensor logits = at::randn({4, 1024}) * 3;
        std::vector<int64_t> kept;
        const at::Tensor want = cn::test::ref_top_p(logits, top_p, &kept);
        const at::Tensor got = cn::kernels::top_p_probs(logits, top_p);
        expect_close(got, want, 1e-5, 1e-9, "top_p " + std::to_string(top_p));
        for (int64_t n = 0; n < 4; ++n) EXPECT_EQ((got[n] > 0).sum().item<int64_t>(), kept[n]) << n;
    }
}

TEST(SamplingCpu, DrawEqualsMultinomialWithTheSameSeed) {
    at::manual_seed(13);
    const at::Tensor probs = at::softmax(at::randn({6, 1024}) * 2, -1);
    for (uint64_t seed : {1u, 2u, 99u}) {
        auto g1 = at::make_generator<at::CPUGeneratorImpl>(seed);
        auto g2 = at::make_generator<at::CPUGeneratorImpl>(seed);
        const at::Tensor want = at::multinomial(probs, 1, false, g1);
        const at::Tensor noise = at::empty_like(probs).exponential_(1, g2);
        EXPECT_TRUE(at::equal(cn::kernels::draw_token(probs, noise), want)) << seed;
    }
    // The history write: hist[n, pos + 1] = token.
    at::Tensor hist = at::zeros({6, 5}, at::kLong);
    const at::Tensor noise = at::ones_like(probs);
    const at::Tensor tok = cn::kernels::draw_token(probs, noise, hist, at::full({1}, 2, at::kLong));
    EXPECT_TRUE(at::equal(hist.select(1, 3), tok.squeeze(1)));
    EXPECT_TRUE(at::equal(tok.squeeze(1), probs.argmax(-1)));
    EXPECT_EQ(hist.select(1, 2).abs().sum().item<int64_t>(), 0);
}

TEST(SamplingCpu, TopPDrawIsTheFilterOfTheScaledLogitsThenTheDraw) {
    at::manual_seed(19);
    const at::Tensor logits = at::randn({4, 1024}) * 3;
    const at::Tensor noise = at::empty_like(logits).exponential_(1);
    for (double temperature : {1.0, 0.7}) {
        at::Tensor probs = at::empty_like(logits), hist = at::zeros({4, 3}, at::kLong);
        const at::Tensor tok = cn::kernels::top_p_draw(logits, temperature, 0.8, noise, hist, at::full({1}, 1, at::kLong), probs);
        const at::Tensor want_p = cn::test::ref_top_p(logits / temperature, 0.8);
        expect_close(probs, want_p, 1e-5, 1e-9, "T " + std::to_string(temperature));
        EXPECT_TRUE(at::equal(tok, (probs / noise).argmax(-1, true))) << temperature;
        EXPECT_TRUE(at::equal(hist.select(1, 2), tok.squeeze(1))) << temperature;
    }
}

TEST(KronosEmbedCpu, TokenAndTimeEmbeddingsAtThePosition) {
    at::manual_seed(17);
    const int64_t N = 3, L = 6, d = 8;
    const at::Tensor e1 = at::randn({16, d}), e2 = at::randn({16, d});
    const at::Tensor h1 = at::randint(16, {N, L}, at::kLong), h2 = at::randint(16, {N, L}, at::kLong);
    const at::Tensor pos = at::full({1}, 4, at::kLong);
    const at::Tensor got = cn::kernels::kronos_token_embed(h1, h2, pos, e1, e2, 2.5);
    const at::Tensor want = at::cat({at::embedding(e1, h1.select(1, 4)) * 2.5, at::embedding(e2, h2.select(1, 4)) * 2.5}, -1);
    EXPECT_TRUE(at::equal(got, want));
    cn::kernels::KronosTimeTables t{at::randn({60, d}), at::randn({24, d}), at::randn({7, d}), at::randn({32, d}), at::randn({13, d})};
    at::Tensor stamps = at::zeros({N, L, 5});
    for (int64_t n = 0; n < N; ++n) {
        stamps[n][4][0] = 59 - n;  // minute
        stamps[n][4][1] = 23 - n;  // hour
        stamps[n][4][2] = n;       // weekday
        stamps[n][4][3] = 31 - n;  // day
        stamps[n][4][4] = 12 - n;  // month
    }
    at::Tensor x = at::randn({N, d});
    const at::Tensor x0 = x.clone();
    cn::kernels::kronos_add_time_(x, stamps, pos, t);
    const at::Tensor st = stamps.select(1, 4).to(at::kLong);
    const at::Tensor te = at::embedding(t.hour, st.select(1, 1)) + at::embedding(t.weekday, st.select(1, 2)) +
                          at::embedding(t.day, st.select(1, 3)) + at::embedding(t.month, st.select(1, 4)) +
                          at::embedding(t.minute, st.select(1, 0));
    EXPECT_TRUE(at::equal(x, x0 + te));
}
