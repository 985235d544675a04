// Kronos parity through the C ABI: random-weight checkpoints written by the reference's own classes and
// cases run by the reference predictor in eval mode (scripts/make_kronos_fixtures.py; shiyu-coder/Kronos
// 67b630e), seeded with torch.manual_seed(seed) right before each prediction. On CPU, fp32:
//   - the sampled tokens (s1 and s2, every step of every sample path) are identical to the reference's;
//   - the mean path and every sample path match within rtol 1e-5 (+ 1e-5 of the series' scale: its history's
//     std + 1e-5, the factor the reference multiplies the model's output by).
// Cases: greedy (top_k 1), temperature + top-p, top-k, several samples, history past max_context (sliding),
// a window that starts sliding mid-forecast, batches of equal and of different lengths, 4 and 5 channels
// (volume / amount filled as the reference fills them), daily and hourly bars.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cutenative.h"
#include "tests/support/cases.h"

namespace {

using json = nlohmann::json;
constexpr double kRtol = 1e-5;

const json& cases() { return cn::test::fixture_cases("kronos"); }

cn_model* model_for(const std::string& name) {
    static std::map<std::string, std::unique_ptr<cn_model, void (*)(cn_model*)>> models;
    auto it = models.find(name);
    if (it != models.end()) return it->second.get();
    cn_error* err = nullptr;
    cn_error_create(&err);
    cn_model* m = nullptr;
    const std::string dir = std::string(CN_FIXTURES_DIR) + "/kronos/" + name;
    EXPECT_EQ(cn_model_create(dir.c_str(), nullptr, &m, err), CN_STATUS_OK) << cn_error_message(err);
    cn_error_free(err);
    models.emplace(name, std::unique_ptr<cn_model, void (*)(cn_model*)>(m, cn_model_free));
    return m;
}

struct Built {
    cn_forecast_request* req = nullptr;
    std::vector<std::vector<size_t>> index;  // [series][channel] -> request series index
    ~Built() { cn_forecast_request_free(req); }
};

void build(const json& c, Built& b, cn_error* err) {
    ASSERT_EQ(cn_forecast_request_create(&b.req, err), CN_STATUS_OK);
    int64_t group = 0;
    for (const auto& s : c["series"]) {
        std::vector<size_t> idx;
        for (const auto& ch : s["values"]) {
            const auto v = ch.get<std::vector<float>>();
            size_t i = 0;
            ASSERT_EQ(cn_forecast_request_add_series(b.req, v.data(), v.size(), group, &i, err), CN_STATUS_OK) << cn_error_message(err);
            idx.push_back(i);
        }
        const auto h = s["history_ts"].get<std::vector<int64_t>>(), f = s["future_ts"].get<std::vector<int64_t>>();
        ASSERT_EQ(cn_forecast_request_set_timestamps(b.req, idx[0], h.data(), h.size(), f.data(), f.size(), err), CN_STATUS_OK)
            << cn_error_message(err);
        b.index.push_back(idx);
        ++group;
    }
    ASSERT_EQ(cn_forecast_request_set_horizon(b.req, c["pred_len"].get<int64_t>(), err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_sampling(b.req, c["temperature"].get<float>(), c["top_k"].get<int32_t>(), c["top_p"].get<float>(),
                                               c["sample_count"].get<int32_t>(), err),
              CN_STATUS_OK)
        << cn_error_message(err);
}

class KronosParity : public ::testing::TestWithParam<size_t> {};

TEST_P(KronosParity, MatchesReference) {
    const json& c = cases()["cases"][GetParam()];
    SCOPED_TRACE(c["name"].get<std::string>());
    cn_model* m = model_for(c["model"]);
    ASSERT_NE(m, nullptr);
    cn_error* err = nullptr;
    cn_error_create(&err);
    Built b;
    build(c, b, err);
    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    ASSERT_EQ(cn_forecast_get_shape(m, b.req, &shape, err), CN_STATUS_OK) << cn_error_message(err);
    const int64_t P = c["pred_len"], S = c["sample_count"];
    ASSERT_EQ(shape.n_outputs, 1u);
    ASSERT_EQ(shape.horizon, static_cast<uint64_t>(P));
    ASSERT_EQ(shape.n_samples, static_cast<uint64_t>(S));
    std::vector<float> out(shape.n_values, NAN), samples(shape.n_sample_values, NAN);
    cn_run_options* opts = nullptr;
    cn_run_options_create(&opts, err);
    cn_run_options_set_seed(opts, c["seed"].get<uint64_t>(), err);
    ASSERT_EQ(cn_forecast(m, b.req, opts, out.data(), out.size(), samples.data(), samples.size(), err), CN_STATUS_OK)
        << cn_error_message(err);
    cn_run_options_free(opts);

    double worst = 0;
    for (size_t si = 0; si < c["series"].size(); ++si) {
        const json& s = c["series"][si];
        const auto& idx = b.index[si];
        for (size_t ch = 0; ch < idx.size(); ++ch) {
            double scale = 0;  // the channel's history std
            const auto hist = s["values"][ch].get<std::vector<double>>();
            double mu = 0;
            for (double v : hist) mu += v;
            mu /= hist.size();
            for (double v : hist) scale += (v - mu) * (v - mu);
            scale = std::sqrt(scale / hist.size());
            for (int64_t h = 0; h < P; ++h) {
                const double ref = s["mean"][h][ch].get<double>(), got = out[idx[ch] * P + h];
                const double unit = scale + 1e-5;  // a constant channel's predictions are 1e-5 * the model's output
                const double tol = kRtol * std::fabs(ref) + 1e-5 * unit;
                EXPECT_LE(std::fabs(got - ref), tol)
                    << "series " << si << " channel " << ch << " step " << h << ": " << got << " vs " << ref;
                worst = std::max(worst, std::fabs(got - ref) / (tol + 1e-300));
                for (int64_t k = 0; k < S; ++k) {
                    const double pr = s["paths"][k][h][ch].get<double>(), pg = samples[(idx[ch] * S + k) * P + h];
                    EXPECT_LE(std::fabs(pg - pr), kRtol * std::fabs(pr) + 1e-5 * unit) << "path " << k << " step " << h;
                }
            }
        }
    }
    std::printf("[ kronos   ] %-18s worst |err|/tol %.3g\n", c["name"].get<std::string>().c_str(), worst);
    cn_error_free(err);
}

INSTANTIATE_TEST_SUITE_P(Cases, KronosParity, ::testing::Range<size_t>(0, 29), [](const ::testing::TestParamInfo<size_t>& info) {
    std::string n = cases()["cases"][info.param]["name"].get<std::string>();
    for (auto& ch : n) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    return n;
});

TEST(KronosFixtures, CaseCount) { EXPECT_EQ(cases()["cases"].size(), 29u) << "update the Range above"; }

}  // namespace

namespace {

// One OHLCV group of `n` bars with `P` future timestamps.
struct Bad {
    cn_error* err = nullptr;
    cn_forecast_request* req = nullptr;
    std::vector<std::vector<float>> ch;
    std::vector<int64_t> hist, fut;
    Bad(size_t n = 20, size_t P = 3) {
        cn_error_create(&err);
        cn_forecast_request_create(&req, err);
        for (int c = 0; c < 5; ++c) {
            ch.emplace_back(n);
            for (size_t i = 0; i < n; ++i) ch[c][i] = 10.0f + c + 0.1f * i;
        }
        for (size_t i = 0; i < n + P; ++i) (i < n ? hist : fut).push_back(1700000000 + 300 * static_cast<int64_t>(i));
        cn_forecast_request_set_horizon(req, static_cast<int64_t>(P), err);
    }
    ~Bad() {
        cn_forecast_request_free(req);
        cn_error_free(err);
    }
    void add_all(int64_t group = 0) {
        for (auto& c : ch) cn_forecast_request_add_series(req, c.data(), c.size(), group, nullptr, err);
        cn_forecast_request_set_timestamps(req, 0, hist.data(), hist.size(), fut.data(), fut.size(), err);
    }
    std::string run(cn_model* m) {
        std::vector<float> out(ch.size() * 3 * 4);
        const cn_status st = cn_forecast(m, req, nullptr, out.data(), out.size(), nullptr, 0, err);
        if (st == CN_STATUS_OK) return "OK";
        EXPECT_EQ(st, CN_STATUS_INVALID_ARGUMENT) << cn_error_message(err);
        return cn_error_message(err);
    }
};

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(KronosRequests, BadInputNamesTheField) {
    cn_model* m = model_for("tiny_a");
    ASSERT_NE(m, nullptr);
    {
        Bad b;
        b.add_all();
        EXPECT_EQ(b.run(m), "OK");
    }
    {
        Bad b;
        b.ch[3][7] = NAN;
        b.add_all();
        EXPECT_TRUE(has(b.run(m), "series[3][7]: NaN")) << b.run(m);
    }
    {
        Bad b;
        b.ch[1][2] = INFINITY;
        b.add_all();
        EXPECT_TRUE(has(b.run(m), "Inf"));
    }
    {
        Bad b;
        std::swap(b.hist[4], b.hist[5]);  // not increasing
        b.add_all();
        const std::string msg = b.run(m);
        EXPECT_TRUE(has(msg, "timestamps")) << msg;
    }
    {
        Bad b;
        b.ch[4].pop_back();  // volume one bar short
        b.add_all();
        const std::string msg = b.run(m);
        EXPECT_TRUE(has(msg, "length")) << msg;
    }
    {
        Bad b;  // no timestamps
        for (auto& c : b.ch) cn_forecast_request_add_series(b.req, c.data(), c.size(), 0, nullptr, b.err);
        EXPECT_TRUE(has(b.run(m), "timestamps"));
    }
    {
        Bad b;  // ungrouped series
        b.add_all(-1);
        EXPECT_TRUE(has(b.run(m), "group of 4-6 series"));
    }
    {
        Bad b;  // three channels only
        b.ch.resize(3);
        b.add_all();
        EXPECT_TRUE(has(b.run(m), "open, high, low, close"));
    }
    {
        Bad b;
        b.add_all();
        const float q = 0.5f;
        cn_forecast_request_set_quantiles(b.req, &q, 1, b.err);
        EXPECT_TRUE(has(b.run(m), "quantiles"));
    }
    {
        Bad b(20, 41);  // horizon past max_context (40)
        b.add_all();
        cn_forecast_shape s;
        cn_forecast_shape_init(&s);
        EXPECT_EQ(cn_forecast_get_shape(m, b.req, &s, b.err), CN_STATUS_INVALID_ARGUMENT);
        EXPECT_TRUE(has(cn_error_message(b.err), "max_context"));
    }
    {
        Bad b;
        b.add_all();
        EXPECT_EQ(cn_forecast_request_set_sampling(b.req, 1.0f, 0, 0.9f, 5000, b.err), CN_STATUS_INVALID_ARGUMENT);
        EXPECT_TRUE(has(cn_error_message(b.err), "sample_count"));
    }
    {
        Bad b;  // 17 tasks x 4096 samples: more rows than one call may run
        for (int64_t g = 0; g < 17; ++g) {
            size_t first = 0;
            for (auto& c : b.ch) cn_forecast_request_add_series(b.req, c.data(), c.size(), g, &first, b.err);
            cn_forecast_request_set_timestamps(b.req, first - 4, b.hist.data(), b.hist.size(), b.fut.data(), b.fut.size(), b.err);
        }
        ASSERT_EQ(cn_forecast_request_set_sampling(b.req, 1.0f, 0, 0.9f, 4096, b.err), CN_STATUS_OK);
        cn_forecast_shape s;
        cn_forecast_shape_init(&s);
        EXPECT_EQ(cn_forecast_get_shape(m, b.req, &s, b.err), CN_STATUS_INVALID_ARGUMENT);
        EXPECT_TRUE(has(cn_error_message(b.err), "rows per call")) << cn_error_message(b.err);
    }
    {
        Bad b;
        b.add_all();
        std::vector<float> out(5 * 3);
        std::vector<float> samples(2);  // too small
        EXPECT_EQ(cn_forecast(m, b.req, nullptr, out.data(), out.size(), samples.data(), samples.size(), b.err),
                  CN_STATUS_INVALID_ARGUMENT);
        EXPECT_TRUE(has(cn_error_message(b.err), "samples_count"));
    }
}
