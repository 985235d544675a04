// GPU (ctest label "gpu"): graph mode replays CUDA graphs captured per shape bucket. Its answers must be
// bit-identical to eager mode on the same device and dtype, whatever the bucket padding (rows are padded
// to a power of two with dummy series of their own), across replays, rollouts, groups, covariates and series of
// different lengths in one batch (split over two streams by default; ctest runs it once more with CN_CHRONOS2_LANES=1).
// Skips cleanly without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "cutenative.h"

#ifndef CN_FIXTURES_DIR
#error "CN_FIXTURES_DIR must point at tests/fixtures"
#endif

namespace {

struct Req {
    std::vector<std::vector<float>> series;
    std::vector<int64_t> groups;
    int64_t horizon;
    bool covariate;
};

std::vector<float> wave(size_t n, float phase, float level) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = level + std::sin(0.4f * i + phase) * level * 0.1f + 0.02f * i;
    return v;
}

std::vector<Req> requests() {
    std::vector<Req> out;
    for (int b : {1, 3, 5, 8}) {  // buckets 1, 4, 8, 8
        Req r{{}, {}, 8, false};
        for (int i = 0; i < b; ++i) r.series.push_back(wave(64, 0.3f * i, 10.0f + i)), r.groups.push_back(-1);
        out.push_back(r);
    }
    Req longer{{wave(50, 0.1f, 5.0f), wave(50, 0.9f, 7.0f)}, {-1, -1}, 40, false};  // rollout past the native horizon
    out.push_back(longer);
    Req group{{wave(48, 0.2f, 3.0f), wave(48, 1.2f, 4.0f), wave(48, 2.0f, 9.0f)}, {0, 0, -1}, 12, false};
    out.push_back(group);
    Req cov{{wave(60, 0.5f, 20.0f)}, {-1}, 10, true};
    out.push_back(cov);
    // Lengths that differ within one batch: a batch is left-padded to its longest series. 256 series are one batch;
    // with lanes (CN_CHRONOS2_LANES=2) it is split into two pieces of 128, and the second piece, whose own series are
    // at most 50 long, must still be padded to the batch's 64. 300 series are two batches (256 rows, 44), as many as
    // the lanes: each runs whole, on a lane of its own.
    for (int n : {256, 300}) {
        Req mixed{{}, {}, 8, false};
        for (int i = 0; i < n; ++i) {
            mixed.series.push_back(
                wave(i == 0 ? 64 : 17 + static_cast<size_t>(i * 13 % 34), 0.1f * static_cast<float>(i % 29), 4.0f + i % 11));
            mixed.groups.push_back(-1);
        }
        out.push_back(mixed);
    }
    return out;
}

std::vector<float> run(cn_model* m, const Req& q) {
    cn_forecast_request* r = nullptr;
    cn_forecast_request_create(&r, nullptr);
    for (size_t i = 0; i < q.series.size(); ++i) {
        cn_forecast_request_add_series(r, q.series[i].data(), q.series[i].size(), q.groups[i], nullptr, nullptr);
    }
    if (q.covariate) {
        const auto past = wave(q.series[0].size(), 2.5f, 1.0f);
        const auto fut = wave(static_cast<size_t>(q.horizon), 2.5f, 1.0f);
        cn_forecast_request_add_covariate(r, 0, past.data(), past.size(), fut.data(), fut.size(), nullptr);
    }
    cn_forecast_request_set_horizon(r, q.horizon, nullptr);
    cn_forecast_shape s;
    cn_forecast_shape_init(&s);
    cn_forecast_get_shape(m, r, &s, nullptr);
    std::vector<float> out(s.n_values);
    cn_error* err = nullptr;
    cn_error_create(&err);
    EXPECT_EQ(cn_forecast(m, r, nullptr, out.data(), out.size(), nullptr, 0, err), CN_STATUS_OK) << cn_error_message(err);
    cn_error_free(err);
    cn_forecast_request_free(r);
    return out;
}

TEST(Chronos2GraphGpu, GraphEqualsEagerBitForBit) {
    if (cn_cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    for (const std::string name : {"tiny_a", "tiny_b"}) {
        for (int dtype : {CN_DTYPE_F32, CN_DTYPE_BF16}) {
            SCOPED_TRACE(name + " dtype " + std::to_string(dtype));
            cn_model_params p;
            cn_model_params_init(&p);
            p.device_type = CN_DEVICE_CUDA;
            p.dtype = dtype;
            cn_model* m = nullptr;
            const std::string dir = std::string(CN_FIXTURES_DIR) + "/chronos2/" + name;
            ASSERT_EQ(cn_model_create(dir.c_str(), &p, &m, nullptr), CN_STATUS_OK);
            std::vector<std::vector<float>> eager;
            for (const auto& q : requests()) eager.push_back(run(m, q));
            cn_error* err = nullptr;
            cn_error_create(&err);
            ASSERT_EQ(cn_model_set_mode(m, CN_MODE_GRAPH, err), CN_STATUS_OK) << cn_error_message(err);
            for (int pass = 0; pass < 2; ++pass) {  // capture, then replay
                const auto reqs = requests();
                for (size_t i = 0; i < reqs.size(); ++i) {
                    const auto got = run(m, reqs[i]);
                    ASSERT_EQ(got.size(), eager[i].size());
                    for (size_t k = 0; k < got.size(); ++k) {
                        ASSERT_EQ(got[k], eager[i][k]) << "request " << i << " value " << k << " pass " << pass;
                    }
                }
            }
            cn_model_info info;
            cn_model_info_init(&info);
            ASSERT_EQ(cn_model_get_info(m, &info, err), CN_STATUS_OK);
            EXPECT_EQ(info.mode, CN_MODE_GRAPH);
            EXPECT_GT(info.graph_pool_bytes, 0u);
            ASSERT_EQ(cn_model_set_mode(m, CN_MODE_EAGER, err), CN_STATUS_OK);
            ASSERT_EQ(cn_model_get_info(m, &info, err), CN_STATUS_OK);
            EXPECT_EQ(info.graph_pool_bytes, 0u) << "leaving graph mode releases the graphs";
            cn_error_free(err);
            cn_model_free(m);
        }
    }
}

// Two threads forecasting on one fused model at once (calls of 300 series: three pieces on the two lanes; of 64:
// one piece on the caller's stream, in a graph of the same row bucket as the 300's last piece) get the answers the
// same calls get one at a time: the graphs' static buffers are never rewritten under a replay on another stream.
TEST(Chronos2GraphGpu, ConcurrentCallsGetTheSequentialAnswers) {
    if (cn_cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cn_model_params p;
    cn_model_params_init(&p);
    p.device_type = CN_DEVICE_CUDA;
    p.dtype = CN_DTYPE_BF16;
    p.mode = CN_MODE_FUSED;
    cn_model* m = nullptr;
    const std::string dir = std::string(CN_FIXTURES_DIR) + "/chronos2/tiny_a";
    ASSERT_EQ(cn_model_create(dir.c_str(), &p, &m, nullptr), CN_STATUS_OK);
    std::vector<Req> reqs;
    for (int n : {300, 64, 300, 64}) {
        Req r{{}, {}, 8, false};
        for (int i = 0; i < n; ++i) {
            r.series.push_back(wave(64, 0.05f * static_cast<float>(i + n), 3.0f + static_cast<float>(i % 13)));
            r.groups.push_back(-1);
        }
        reqs.push_back(r);
    }
    std::vector<std::vector<float>> sequential;
    for (const auto& r : reqs) sequential.push_back(run(m, r));
    for (int round = 0; round < 3; ++round) {
        std::vector<std::vector<float>> got(reqs.size());
        std::vector<std::thread> threads;
        for (size_t t = 0; t < 2; ++t) {
            threads.emplace_back([&, t] {
                for (size_t i = t; i < reqs.size(); i += 2) got[i] = run(m, reqs[i]);
            });
        }
        for (auto& th : threads) th.join();
        for (size_t i = 0; i < reqs.size(); ++i) {
            ASSERT_EQ(got[i].size(), sequential[i].size());
            for (size_t k = 0; k < got[i].size(); ++k)
                ASSERT_EQ(got[i][k], sequential[i][k]) << "request " << i << " value " << k << " round " << round;
        }
    }
    cn_model_free(m);
}

}  // namespace

namespace {

// A request whose dense group attention cannot fit on any GPU: one multivariate task of 60,000 series (the
// group mask alone would be 60000^2 x S floats). It used to answer OUT_OF_DEVICE_MEMORY after trying; the
// library now refuses it before allocating (INVALID_ARGUMENT naming the task: a pass's mask is bounded by 2^28
// elements), and the model stays usable with the same answers, in eager and in graph mode.
TEST(Chronos2Gpu, OversizedGroupIsRefusedAndTheModelRecovers) {
    if (cn_cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    for (int mode : {CN_MODE_EAGER, CN_MODE_GRAPH}) {
        SCOPED_TRACE(mode);
        cn_model_params p;
        cn_model_params_init(&p);
        p.device_type = CN_DEVICE_CUDA;
        p.mode = mode;
        cn_model* m = nullptr;
        const std::string dir = std::string(CN_FIXTURES_DIR) + "/chronos2/tiny_a";
        ASSERT_EQ(cn_model_create(dir.c_str(), &p, &m, nullptr), CN_STATUS_OK);
        const Req small{{wave(64, 0.1f, 10.0f)}, {-1}, 8, false};
        const auto before = run(m, small);

        cn_forecast_request* big = nullptr;
        cn_forecast_request_create(&big, nullptr);
        const auto v = wave(128, 0.3f, 5.0f);
        for (int i = 0; i < 60000; ++i) cn_forecast_request_add_series(big, v.data(), v.size(), 0, nullptr, nullptr);
        cn_forecast_request_set_horizon(big, 8, nullptr);
        cn_forecast_shape s;
        cn_forecast_shape_init(&s);
        ASSERT_EQ(cn_forecast_get_shape(m, big, &s, nullptr), CN_STATUS_OK);
        std::vector<float> out(s.n_values);
        cn_error* err = nullptr;
        cn_error_create(&err);
        EXPECT_EQ(cn_forecast(m, big, nullptr, out.data(), out.size(), nullptr, 0, err), CN_STATUS_INVALID_ARGUMENT)
            << cn_error_message(err);
        EXPECT_NE(std::string(cn_error_message(err)).find("60000 rows (targets and covariates) attend to each other"), std::string::npos)
            << cn_error_message(err);
        cn_error_free(err);
        cn_forecast_request_free(big);

        const auto after = run(m, small);  // still works, same answer
        ASSERT_EQ(after.size(), before.size());
        for (size_t k = 0; k < after.size(); ++k) ASSERT_EQ(after[k], before[k]) << k;
        cn_model_free(m);
    }
}

}  // namespace
