// GPU (ctest label "gpu"): batch invariance of Chronos-2 on CUDA, in every mode and dtype. One series is placed at
// the first, a middle and the last position of calls of B = 1, 2, 63, 64, 65 and 1000 univariate series (the
// others random walks of the same length); its quantiles must be bit-identical to the B = 1 call's. The server
// merges requests on this guarantee. ctest runs it three times: with the default GEMMs (one launch over all rows,
// kernels/rows_gemm.h, with its row-count tiers), with the tiers off (the base configuration for every row count)
// and with CN_ROWS_GEMM=0 (one GEMM per series). Skips cleanly without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cutenative.h"

#ifndef CN_FIXTURES_DIR
#error "CN_FIXTURES_DIR must point at tests/fixtures"
#endif

namespace {

constexpr size_t kLength = 120;
constexpr int64_t kHorizon = 24;

std::vector<float> walk(std::mt19937& rng, float level) {
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> v(kLength);
    float x = level;
    for (auto& e : v) e = (x += n(rng));
    return v;
}

// The outputs of series `pos` in a call of `batch` series whose other members are `others` (cycled).
std::vector<float> forecast_at(cn_model* m, const std::vector<float>& target, size_t batch, size_t pos,
                               const std::vector<std::vector<float>>& others) {
    cn_forecast_request* r = nullptr;
    cn_forecast_request_create(&r, nullptr);
    for (size_t i = 0, o = 0; i < batch; ++i) {
        const std::vector<float>& s = i == pos ? target : others[o++ % others.size()];
        cn_forecast_request_add_series(r, s.data(), s.size(), -1, nullptr, nullptr);
    }
    cn_forecast_request_set_horizon(r, kHorizon, nullptr);
    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    EXPECT_EQ(cn_forecast_get_shape(m, r, &shape, nullptr), CN_STATUS_OK);
    std::vector<float> out(shape.n_values);
    cn_error* err = nullptr;
    cn_error_create(&err);
    EXPECT_EQ(cn_forecast(m, r, nullptr, out.data(), out.size(), nullptr, 0, err), CN_STATUS_OK) << cn_error_message(err);
    cn_error_free(err);
    cn_forecast_request_free(r);
    const size_t per = shape.n_values / batch;
    return std::vector<float>(out.begin() + static_cast<std::ptrdiff_t>(pos * per),
                              out.begin() + static_cast<std::ptrdiff_t>((pos + 1) * per));
}

TEST(Chronos2BatchGpu, ASeriesIsBitIdenticalWhateverItsCall) {
    if (cn_cuda_device_count() == 0) GTEST_SKIP() << "SKIPPED: no CUDA device";
    std::mt19937 rng(7);
    const std::vector<float> target = walk(rng, 50.0f);
    std::vector<std::vector<float>> others;
    for (int i = 0; i < 37; ++i) others.push_back(walk(rng, 10.0f * static_cast<float>(i % 7)));
    const std::string dir = std::string(CN_FIXTURES_DIR) + "/chronos2/tiny_a";
    for (cn_dtype dtype : {CN_DTYPE_F32, CN_DTYPE_BF16}) {
        for (cn_mode mode : {CN_MODE_EAGER, CN_MODE_GRAPH, CN_MODE_FUSED}) {
            SCOPED_TRACE(std::string(cn_dtype_name(dtype)) + " " + cn_mode_name(mode));
            cn_model_params p;
            cn_model_params_init(&p);
            p.device_type = CN_DEVICE_CUDA;
            p.dtype = dtype;
            p.mode = mode;
            cn_model* m = nullptr;
            cn_error* err = nullptr;
            cn_error_create(&err);
            ASSERT_EQ(cn_model_create(dir.c_str(), &p, &m, err), CN_STATUS_OK) << cn_error_message(err);
            cn_error_free(err);
            const std::vector<float> alone = forecast_at(m, target, 1, 0, others);
            size_t compared = 0;
            for (size_t batch : {size_t{2}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}}) {
                for (size_t pos : {size_t{0}, batch / 2, batch - 1}) {
                    const std::vector<float> got = forecast_at(m, target, batch, pos, others);
                    ASSERT_EQ(got.size(), alone.size());
                    EXPECT_EQ(std::memcmp(got.data(), alone.data(), got.size() * sizeof(float)), 0)
                        << "B = " << batch << ", position " << pos << ": the series' outputs differ from its B = 1 call";
                    ++compared;
                }
            }
            EXPECT_EQ(compared, 15u);
            cn_model_free(m);
        }
    }
}

}  // namespace
