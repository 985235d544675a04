// Chronos-2 parity through the C ABI: checkpoints written by the reference package's own model class
// (tests/fixtures/chronos2/tiny_*), cases and outputs from chronos-forecasting's
// Chronos2Pipeline.predict_quantiles (scripts/make_chronos2_fixtures.py). fp32, CPU.
//
// Tolerance, per value: |ours - ref| <= 1e-4 * |ref| + 1e-4 * scale, where scale is the unit the model predicts
// in: the population standard deviation of the observed values of that target series, or the instance norm's
// eps (1e-5) where that deviation is 0 in fp32 (a constant series, or values so small that fp32 squares
// underflow).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cutenative.h"
#include "tests/support/cases.h"

#ifndef CN_FIXTURES_DIR
#error "CN_FIXTURES_DIR must point at tests/fixtures"
#endif

namespace {

using json = nlohmann::json;
constexpr double kRtol = 1e-4;
constexpr double kAtolPerScale = 1e-4;

const json& cases() { return cn::test::fixture_cases("chronos2"); }

std::vector<float> floats(const json& a) {
    std::vector<float> v;
    for (const auto& x : a) v.push_back(x.is_null() ? std::numeric_limits<float>::quiet_NaN() : x.get<float>());
    return v;
}

double series_scale(const std::vector<float>& v) {
    double s = 0, n = 0;
    for (float x : v) {
        if (!std::isnan(x)) s += x, n += 1;
    }
    const double mean = s / n;
    double ss = 0;
    for (float x : v) {
        if (!std::isnan(x)) ss += (x - mean) * (x - mean);
    }
    const double sd = std::sqrt(ss / n);
    const float f = static_cast<float>(sd);
    return f * f == 0.f ? 1e-5 : sd;  // the reference replaces a zero fp32 scale by eps
}

struct ModelDeleter {
    void operator()(cn_model* m) const { cn_model_free(m); }
};
using ModelPtr = std::unique_ptr<cn_model, ModelDeleter>;

cn_model* model_for(const std::string& name, cn_mode mode) {
    static std::map<std::pair<std::string, int>, ModelPtr> models;
    auto it = models.find({name, mode});
    if (it != models.end()) return it->second.get();
    cn_model* m = nullptr;
    cn_error* err = nullptr;
    cn_error_create(&err);
    cn_model_params mp;
    cn_model_params_init(&mp);
    mp.mode = mode;
    const std::string dir = std::string(CN_FIXTURES_DIR) + "/chronos2/" + name;
    EXPECT_EQ(cn_model_create(dir.c_str(), &mp, &m, err), CN_STATUS_OK) << cn_error_message(err);
    cn_error_free(err);
    models.emplace(std::make_pair(name, static_cast<int>(mode)), ModelPtr(m));
    return m;
}

// Labels of a categorical covariate as C strings (NULL for null), kept alive by `store`.
std::vector<const char*> labels(const json& a, std::vector<std::string>& store) {
    store.clear();
    store.reserve(a.size());
    std::vector<const char*> out;
    for (const auto& x : a) store.push_back(x.is_null() ? std::string() : x.get<std::string>());
    for (size_t i = 0; i < a.size(); ++i) out.push_back(a[i].is_null() ? nullptr : store[i].c_str());
    return out;
}

bool is_categorical(const json& a) {
    for (const auto& x : a) {
        if (x.is_string()) return true;
    }
    return false;
}

// Each case in eager mode (ATen ops) and in fused mode (cutenative's kernels, their CPU paths here): the
// same tolerance holds for both.
class Chronos2Parity : public ::testing::TestWithParam<std::tuple<size_t, cn_mode>> {};

TEST_P(Chronos2Parity, MatchesReference) {
    const json& c = cases()["cases"][std::get<0>(GetParam())];
    const cn_mode mode = std::get<1>(GetParam());
    SCOPED_TRACE(c["name"].get<std::string>() + " " + cn_mode_name(mode));
    cn_model* model = model_for(c["model"], mode);
    ASSERT_NE(model, nullptr);
    cn_error* err = nullptr;
    cn_error_create(&err);
    cn_forecast_request* req = nullptr;
    ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);

    // Tasks -> series (a multivariate task is one group) and covariates in the reference's row order:
    // past-only covariates by sorted name, then known-future ones by sorted name (json objects iterate
    // in sorted key order).
    std::vector<std::vector<size_t>> task_series;
    std::vector<std::vector<float>> targets;
    int64_t next_group = 0;
    for (const auto& task : c["tasks"]) {
        const auto& rows = task["target"];
        const int64_t group = rows.size() > 1 ? next_group++ : -1;
        std::vector<size_t> idx;
        for (const auto& row : rows) {
            targets.push_back(floats(row));
            size_t i = 0;
            ASSERT_EQ(cn_forecast_request_add_series(req, targets.back().data(), targets.back().size(), group, &i, err), CN_STATUS_OK)
                << cn_error_message(err);
            idx.push_back(i);
        }
        task_series.push_back(idx);
        const json past = task.value("past_covariates", json::object());
        const json future = task.value("future_covariates", json::object());
        for (int pass = 0; pass < 2; ++pass) {  // 0: past-only, 1: known future
            for (auto it = past.begin(); it != past.end(); ++it) {
                const bool known = future.contains(it.key());
                if (known != (pass == 1)) continue;
                if (is_categorical(*it) || (known && is_categorical(future[it.key()]))) {
                    std::vector<std::string> s1, s2;
                    const auto p = labels(*it, s1);
                    const auto f = known ? labels(future[it.key()], s2) : std::vector<const char*>{};
                    ASSERT_EQ(cn_forecast_request_add_categorical_covariate(req, idx[0], p.data(), p.size(), f.empty() ? nullptr : f.data(),
                                                                            f.size(), err),
                              CN_STATUS_OK)
                        << cn_error_message(err);
                } else {
                    const auto p = floats(*it);
                    const auto f = known ? floats(future[it.key()]) : std::vector<float>{};
                    ASSERT_EQ(
                        cn_forecast_request_add_covariate(req, idx[0], p.data(), p.size(), f.empty() ? nullptr : f.data(), f.size(), err),
                        CN_STATUS_OK)
                        << cn_error_message(err);
                }
            }
        }
    }
    const int64_t H = c["prediction_length"];
    const auto levels = floats(c["quantile_levels"]);
    ASSERT_EQ(cn_forecast_request_set_horizon(req, H, err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_quantiles(req, levels.data(), levels.size(), err), CN_STATUS_OK);

    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    ASSERT_EQ(cn_forecast_get_shape(model, req, &shape, err), CN_STATUS_OK) << cn_error_message(err);
    ASSERT_EQ(shape.n_series, targets.size());
    ASSERT_EQ(shape.n_outputs, levels.size());
    ASSERT_EQ(shape.horizon, static_cast<uint64_t>(H));
    std::vector<float> out(shape.n_values, std::numeric_limits<float>::quiet_NaN());
    ASSERT_EQ(cn_forecast(model, req, nullptr, out.data(), out.size(), nullptr, 0, err), CN_STATUS_OK) << cn_error_message(err);

    const size_t nq = levels.size();
    double worst_rel = 0, max_abs = 0, max_abs_over_scale = 0;
    for (size_t t = 0; t < task_series.size(); ++t) {
        const json& ref = c["quantiles"][t];  // [n_targets][H][nq]
        for (size_t k = 0; k < task_series[t].size(); ++k) {
            const size_t s = task_series[t][k];
            const double scale = series_scale(targets[s]);
            for (int64_t h = 0; h < H; ++h) {
                for (size_t q = 0; q < nq; ++q) {
                    const double r = ref[k][h][q].get<double>();
                    const double o = out[(s * nq + q) * H + h];
                    const double tol = kRtol * std::fabs(r) + kAtolPerScale * scale;
                    ASSERT_LE(std::fabs(o - r), tol) << "task " << t << " target " << k << " step " << h << " level " << levels[q]
                                                     << ": ours " << o << " reference " << r;
                    worst_rel = std::max(worst_rel, std::fabs(o - r) / (std::fabs(r) * kRtol + kAtolPerScale * scale + 1e-300));
                    max_abs = std::max(max_abs, std::fabs(o - r));
                    if (scale > 0) max_abs_over_scale = std::max(max_abs_over_scale, std::fabs(o - r) / scale);
                }
            }
        }
    }
    RecordProperty("worst_error_over_tolerance", std::to_string(worst_rel));
    std::printf("[ parity   ] %-5s %-36s max |err| %.3g  max |err|/scale %.3g  worst |err|/tol %.3g\n", cn_mode_name(mode),
                c["name"].get<std::string>().c_str(), max_abs, max_abs_over_scale, worst_rel);
    cn_forecast_request_free(req);
    cn_error_free(err);
}

INSTANTIATE_TEST_SUITE_P(Cases, Chronos2Parity,
                         ::testing::Combine(::testing::Range<size_t>(0, 47), ::testing::Values(CN_MODE_EAGER, CN_MODE_FUSED)),
                         [](const ::testing::TestParamInfo<std::tuple<size_t, cn_mode>>& info) {
                             std::string n = cases()["cases"][std::get<0>(info.param)]["name"].get<std::string>() + "_" +
                                             cn_mode_name(std::get<1>(info.param));
                             for (auto& ch : n) {
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             }
                             return n;
                         });

TEST(Chronos2Fixtures, CaseCount) { EXPECT_EQ(cases()["cases"].size(), 47u) << "update the Range above"; }

}  // namespace
