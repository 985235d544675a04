// Toto through the C ABI (tests/fixtures/toto): a forecast with the reference's decoding options equals the
// reference's (case a_univariate: 8 samples, 4 per model call, KV cache; the 0.1/0.5/0.9 quantiles then the
// mean per series), the mean rollout, and the refusals, each INVALID_ARGUMENT naming its field.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "capi/include/cutenative.h"
#include "tests/models/toto/toto_fixture.h"

namespace {

struct Fixture {
    cn_error* err = nullptr;
    cn_model* m = nullptr;
    cn_forecast_request* req = nullptr;
    Fixture() {
        cn_error_create(&err);
        EXPECT_EQ(cn_model_create((cn::test::toto_dir() + "/tiny_a").c_str(), nullptr, &m, err), CN_STATUS_OK) << cn_error_message(err);
        cn_forecast_request_create(&req, err);
    }
    ~Fixture() {
        cn_forecast_request_free(req);
        cn_model_free(m);
        cn_error_free(err);
    }
};

// Case a's one series: T values, masked ones NaN.
std::vector<float> case_a_series() {
    std::vector<int64_t> shape;
    std::vector<float> v = cn::test::toto_floats("a_univariate/series", &shape);
    std::string dtype;
    const std::vector<uint8_t> mask = cn::test::toto_array("a_univariate/padding_mask", &dtype, &shape);
    for (size_t i = 0; i < v.size(); ++i) {
        if (!mask[i]) v[i] = std::numeric_limits<float>::quiet_NaN();
    }
    return v;
}

}  // namespace

TEST(TotoCapi, ForecastEqualsTheReference) {
    Fixture f;
    cn_model_info info;
    cn_model_info_init(&info);
    ASSERT_EQ(cn_model_get_info(f.m, &info, f.err), CN_STATUS_OK);
    EXPECT_EQ(info.kind, CN_MODEL_KIND_TOTO);
    const auto& c = cn::test::toto_case("a_univariate");
    const std::vector<float> x = case_a_series();
    ASSERT_EQ(cn_forecast_request_add_series(f.req, x.data(), x.size(), -1, nullptr, f.err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_horizon(f.req, c["pred_len"].get<int64_t>(), f.err), CN_STATUS_OK);
    const float levels[] = {0.1f, 0.5f, 0.9f};
    ASSERT_EQ(cn_forecast_request_set_quantiles(f.req, levels, 3, f.err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_sampling(f.req, 1.0f, 0, 0.9f, c["num_samples"].get<int32_t>(), f.err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_decoding(f.req, c["samples_per_batch"].get<int32_t>(), 1, 0, f.err), CN_STATUS_OK);
    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    ASSERT_EQ(cn_forecast_get_shape(f.m, f.req, &shape, f.err), CN_STATUS_OK) << cn_error_message(f.err);
    EXPECT_EQ(shape.n_outputs, 4u);
    EXPECT_EQ(shape.n_samples, 8u);
    EXPECT_EQ(shape.n_sample_values, shape.n_series * shape.n_samples * shape.horizon);  // a path is one output wide
    cn_run_options* opts = nullptr;
    cn_run_options_create(&opts, f.err);
    cn_run_options_set_seed(opts, c["seed"].get<uint64_t>(), f.err);
    std::vector<float> out(shape.n_values), samples(shape.n_sample_values);
    ASSERT_EQ(cn_forecast(f.m, f.req, opts, out.data(), out.size(), samples.data(), samples.size(), f.err), CN_STATUS_OK)
        << cn_error_message(f.err);
    cn_run_options_free(opts);
    std::vector<int64_t> s;
    const std::vector<float> mean = cn::test::toto_floats("a_univariate/mean", &s), q = cn::test::toto_floats("a_univariate/quantiles", &s);
    const std::vector<float> ref = cn::test::toto_floats("a_univariate/samples", &s);  // [1, 1, H, S]
    const size_t H = shape.horizon, S = shape.n_samples;
    // The thread count differs from the fixtures' (one): GEMMs may round differently, the draws are the same.
    for (size_t h = 0; h < H; ++h) {
        for (size_t k = 0; k < 3; ++k)
            EXPECT_NEAR(out[k * H + h], q[k * H + h], 1e-4 * (1 + std::fabs(q[k * H + h]))) << "q" << k << " step " << h;
        EXPECT_NEAR(out[3 * H + h], mean[h], 1e-4 * (1 + std::fabs(mean[h]))) << "mean step " << h;
        for (size_t k = 0; k < S; ++k) EXPECT_NEAR(samples[k * H + h], ref[h * S + k], 1e-4 * (1 + std::fabs(ref[h * S + k])));
    }
    // The mean rollout: one output, no samples; quantiles refused with it.
    ASSERT_EQ(cn_forecast_request_set_decoding(f.req, 0, 1, 1, f.err), CN_STATUS_OK);
    EXPECT_EQ(cn_forecast_get_shape(f.m, f.req, &shape, f.err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(cn_error_message(f.err)).find("quantiles"), std::string::npos) << cn_error_message(f.err);
}

TEST(TotoCapi, RefusalsNameTheField) {
    struct Case {
        const char* name;
        int32_t sbs, samples;
        float temperature, value;
        const char* want;
    };
    for (const Case& k : {Case{"sbs not dividing", 3, 8, 1.0f, 1.0f, "samples_per_batch"},
                          Case{"temperature", 0, 8, 0.5f, 1.0f, "temperature"}, Case{"Inf", 0, 8, 1.0f, INFINITY, "series[0][2]: Inf"}}) {
        SCOPED_TRACE(k.name);
        Fixture f;
        std::vector<float> x = {1, 2, 3, 4, 5, 6};
        x[2] = k.value;
        ASSERT_EQ(cn_forecast_request_add_series(f.req, x.data(), x.size(), -1, nullptr, f.err), CN_STATUS_OK);
        ASSERT_EQ(cn_forecast_request_set_horizon(f.req, 4, f.err), CN_STATUS_OK);
        ASSERT_EQ(cn_forecast_request_set_sampling(f.req, k.temperature, 0, 0.9f, k.samples, f.err), CN_STATUS_OK);
        ASSERT_EQ(cn_forecast_request_set_decoding(f.req, k.sbs, 1, 0, f.err), CN_STATUS_OK);
        cn_forecast_shape shape;
        cn_forecast_shape_init(&shape);
        cn_status st = cn_forecast_get_shape(f.m, f.req, &shape, f.err);
        if (st == CN_STATUS_OK) {
            std::vector<float> out(shape.n_values);
            st = cn_forecast(f.m, f.req, nullptr, out.data(), out.size(), nullptr, 0, f.err);
        }
        EXPECT_EQ(st, CN_STATUS_INVALID_ARGUMENT);
        EXPECT_NE(std::string(cn_error_message(f.err)).find(k.want), std::string::npos) << cn_error_message(f.err);
    }
}

// A request whose working memory would not fit is refused when its shape is asked for, before anything is
// allocated: 4100 one-value series rolled out over 65,472 steps: the float64 scaler over 4100 rows x 65,488 steps
// (about 24 floats a step: 6.4e9) is beyond the per-call limit of 2^32 (on the full-size model the KV cache, 2 x 11
// layers x 768 x 1024 patches a row, would be refused too).
TEST(TotoCapi, HugeCallRefusedBeforeAllocation) {
    Fixture f;
    const float one = 1.0f;
    for (int i = 0; i < 4100; ++i) ASSERT_EQ(cn_forecast_request_add_series(f.req, &one, 1, -1, nullptr, f.err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_horizon(f.req, 65472, f.err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_decoding(f.req, 0, 1, 1, f.err), CN_STATUS_OK);
    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    EXPECT_EQ(cn_forecast_get_shape(f.m, f.req, &shape, f.err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(cn_error_message(f.err)).find("per-call limit of 2^32"), std::string::npos) << cn_error_message(f.err);
}

// A deadline stops a Toto forecast between model calls: DEADLINE_EXCEEDED, the outputs untouched.
TEST(TotoCapi, DeadlineStopsBetweenModelCalls) {
    Fixture f;
    std::vector<float> x(4000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17);
    ASSERT_EQ(cn_forecast_request_add_series(f.req, x.data(), x.size(), -1, nullptr, f.err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_horizon(f.req, 4096, f.err), CN_STATUS_OK);  // 256 model calls of 64 paths
    ASSERT_EQ(cn_forecast_request_set_sampling(f.req, 1.0f, 0, 0.9f, 64, f.err), CN_STATUS_OK);
    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    ASSERT_EQ(cn_forecast_get_shape(f.m, f.req, &shape, f.err), CN_STATUS_OK) << cn_error_message(f.err);
    std::vector<float> out(shape.n_values, -7.0f);
    cn_run_options* opts = nullptr;
    cn_run_options_create(&opts, f.err);
    cn_run_options_set_timeout_ms(opts, 50, f.err);
    EXPECT_EQ(cn_forecast(f.m, f.req, opts, out.data(), out.size(), nullptr, 0, f.err), CN_STATUS_DEADLINE_EXCEEDED)
        << cn_error_message(f.err);
    cn_run_options_free(opts);
    for (float v : out) ASSERT_EQ(v, -7.0f) << "a failed call wrote its outputs";
}
