// Forecast requests through the C ABI on a reference-made Chronos-2 checkpoint: bad input gets
// INVALID_ARGUMENT with a message naming the field; cancellation and deadlines; a checkpoint whose
// shapes disagree with its config is MODEL_FORMAT naming the tensor; batching does not change results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cutenative.h"
#include "tests/support/fixtures.h"

#ifndef CN_FIXTURES_DIR
#error "CN_FIXTURES_DIR must point at tests/fixtures"
#endif

namespace {

const std::string kTinyA = std::string(CN_FIXTURES_DIR) + "/chronos2/tiny_a";
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Fixture : ::testing::Test {
    cn_model* model = nullptr;
    cn_error* err = nullptr;
    cn_forecast_request* req = nullptr;
    void SetUp() override {
        cn_error_create(&err);
        ASSERT_EQ(cn_model_create(kTinyA.c_str(), nullptr, &model, err), CN_STATUS_OK) << cn_error_message(err);
        ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);
    }
    void TearDown() override {
        cn_forecast_request_free(req);
        cn_model_free(model);
        cn_error_free(err);
    }
    std::vector<float> series(size_t n, float phase = 0) {
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = 10.0f + std::sin(0.3f * i + phase) + 0.01f * i;
        return v;
    }
    void add(const std::vector<float>& v, int64_t group = -1) {
        ASSERT_EQ(cn_forecast_request_add_series(req, v.data(), v.size(), group, nullptr, err), CN_STATUS_OK);
    }
    // Runs the forecast; returns the status and leaves the message in err.
    cn_status run(std::vector<float>* out = nullptr, cn_run_options* opts = nullptr) {
        cn_forecast_shape s;
        cn_forecast_shape_init(&s);
        const cn_status st = cn_forecast_get_shape(model, req, &s, err);
        std::vector<float> local(st == CN_STATUS_OK ? s.n_values : 1);
        std::vector<float>& o = out ? *out : local;
        o.assign(std::max<uint64_t>(s.n_values, 1), kNaN);
        return cn_forecast(model, req, opts, o.data(), o.size(), nullptr, 0, err);
    }
    std::string msg() const { return cn_error_message(err); }
};

TEST_F(Fixture, InvalidValuesNameTheField) {
    auto v = series(40);
    add(v);
    EXPECT_EQ(run(), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "horizon: not set (must be >= 1)");
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 8, err), CN_STATUS_OK);
    std::vector<float> out;
    ASSERT_EQ(run(&out), CN_STATUS_OK) << msg();

    auto inf = series(30);
    inf[7] = kInf;
    add(inf);
    EXPECT_EQ(run(), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "series[1]: value 7 is infinite");
}

// The value scan works in blocks of 64 values plus a tail: an infinity or a lone number anywhere in a long series.
TEST_F(Fixture, ValueChecksCoverEveryPositionOfLongSeries) {
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 4, err), CN_STATUS_OK);
    for (size_t pos : {size_t{0}, size_t{63}, size_t{64}, size_t{127}, size_t{130}, size_t{199}}) {
        for (float bad : {kInf, -kInf}) {
            cn_forecast_request_free(req);
            ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);
            ASSERT_EQ(cn_forecast_request_set_horizon(req, 4, err), CN_STATUS_OK);
            auto v = series(200);
            v[pos] = bad;
            add(v);
            EXPECT_EQ(run(), CN_STATUS_INVALID_ARGUMENT);
            EXPECT_EQ(msg(), "series[0]: value " + std::to_string(pos) + " is infinite");
        }
        cn_forecast_request_free(req);
        ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);
        ASSERT_EQ(cn_forecast_request_set_horizon(req, 4, err), CN_STATUS_OK);
        std::vector<float> nan(200, kNaN);
        add(nan);
        EXPECT_EQ(run(), CN_STATUS_INVALID_ARGUMENT);
        EXPECT_EQ(msg(), "series[0]: every value is NaN (missing)");
        cn_forecast_request_free(req);
        ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);
        ASSERT_EQ(cn_forecast_request_set_horizon(req, 4, err), CN_STATUS_OK);
        nan[pos] = 1.5f;  // one number anywhere is enough
        add(nan);
        std::vector<float> out;
        EXPECT_EQ(run(&out), CN_STATUS_OK) << msg();
    }
}

// Values are checked batch by batch, just before each batch is prepared: a bad value in the second batch (the
// reference's 256 rows per batch) fails the call with the same status and message after the first batch ran, and
// the model answers the next request as before.
TEST_F(Fixture, ABadValueInALaterBatchFailsTheCallAndLosesNothing) {
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 4, err), CN_STATUS_OK);
    for (size_t i = 0; i < 300; ++i) add(series(24, 0.1f * static_cast<float>(i)));
    std::vector<float> want;
    ASSERT_EQ(run(&want), CN_STATUS_OK) << msg();
    for (const char* what : {"inf", "nan"}) {
        cn_forecast_request_free(req);
        ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);
        ASSERT_EQ(cn_forecast_request_set_horizon(req, 4, err), CN_STATUS_OK);
        for (size_t i = 0; i < 300; ++i) {
            auto v = series(24, 0.1f * static_cast<float>(i));
            if (i == 290) {
                if (std::string(what) == "inf")
                    v[5] = -kInf;
                else
                    v.assign(24, kNaN);
            }
            add(v);
        }
        EXPECT_EQ(run(), CN_STATUS_INVALID_ARGUMENT) << what;
        EXPECT_EQ(msg(), std::string(what) == "inf" ? "series[290]: value 5 is infinite" : "series[290]: every value is NaN (missing)");
    }
    cn_forecast_request_free(req);
    ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 4, err), CN_STATUS_OK);
    for (size_t i = 0; i < 300; ++i) add(series(24, 0.1f * static_cast<float>(i)));
    std::vector<float> again;
    ASSERT_EQ(run(&again), CN_STATUS_OK) << msg();
    ASSERT_EQ(again.size(), want.size());
    EXPECT_EQ(std::memcmp(again.data(), want.data(), want.size() * sizeof(float)), 0);
}

TEST_F(Fixture, AllNaNSeries) {
    add(std::vector<float>(20, kNaN));
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 4, err), CN_STATUS_OK);
    EXPECT_EQ(run(), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "series[0]: every value is NaN (missing)");
}

TEST_F(Fixture, HorizonLimits) {
    add(series(30));
    EXPECT_EQ(cn_forecast_request_set_horizon(req, 0, err), CN_STATUS_INVALID_ARGUMENT);
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 1 << 20, err), CN_STATUS_OK);  // structurally fine ...
    EXPECT_EQ(run(), CN_STATUS_INVALID_ARGUMENT);                                 // ... but beyond the model
    EXPECT_EQ(msg(), "horizon: 1048576 exceeds this model's limit of 65536");
}

// A forecast beyond CN_FORECAST_MAX_VALUES floats is refused by the shape query and by the call, before the
// caller (or the library) allocates it: 300 series x 99 levels x horizon 65536 = 1.9e9 values.
TEST_F(Fixture, OutputBeyondTheLibraryLimitIsRefused) {
    const auto v = series(30);
    for (int i = 0; i < 300; ++i) add(v);
    std::vector<float> levels(99);
    for (int i = 0; i < 99; ++i) levels[i] = (i + 1) / 100.0f;
    ASSERT_EQ(cn_forecast_request_set_quantiles(req, levels.data(), levels.size(), err), CN_STATUS_OK) << msg();
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 65536, err), CN_STATUS_OK);
    cn_forecast_shape s;
    cn_forecast_shape_init(&s);
    EXPECT_EQ(cn_forecast_get_shape(model, req, &s, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(),
              "the forecast would hold 1946419200 values (series x outputs x horizon), above the library's limit of "
              "268435456 (CN_FORECAST_MAX_VALUES)");
    float out[4];
    EXPECT_EQ(cn_forecast(model, req, nullptr, out, 4, nullptr, 0, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(msg().find("CN_FORECAST_MAX_VALUES"), std::string::npos);
}

// A group too large for one pass's attention mask is refused, naming the task, before the pass runs: 400
// series in one group past the native horizon (9 paths each) on tiny_a (21 tokens) is 3600^2 x 21 elements.
TEST_F(Fixture, GroupBeyondTheMaskLimitIsRefused) {
    const auto v = series(40);
    for (int i = 0; i < 400; ++i) add(v, 3);
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 40, err), CN_STATUS_OK);
    std::vector<float> out;
    EXPECT_EQ(run(&out), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(msg().find("task of series[0]: 400 rows (targets and covariates) attend to each other over 3600 rows"), std::string::npos)
        << msg();
    // Within the native horizon (one path per row) the same group fits and runs.
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 8, err), CN_STATUS_OK);
    EXPECT_EQ(run(&out), CN_STATUS_OK) << msg();
}

TEST_F(Fixture, CovariateLengthsAndGroups) {
    auto v = series(30);
    add(v);
    const auto c = series(29);
    EXPECT_EQ(cn_forecast_request_add_covariate(req, 0, c.data(), c.size(), nullptr, 0, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "past: length 29 differs from the series' 30");
    EXPECT_EQ(cn_forecast_request_add_covariate(req, 3, v.data(), v.size(), nullptr, 0, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "covariate: series_index 3 but the request has 1 series");
    const auto fut = series(12);
    ASSERT_EQ(cn_forecast_request_add_covariate(req, 0, v.data(), v.size(), fut.data(), fut.size(), err), CN_STATUS_OK);
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 8, err), CN_STATUS_OK);
    EXPECT_EQ(run(), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "covariates[0]: 12 future values exceed the horizon of 8");
    EXPECT_EQ(cn_forecast_request_add_series(req, v.data(), v.size(), -2, nullptr, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "group: must be -1 (own task) or >= 0");
}

// cn_forecast_request_add_series_batch: the same request as one add_series per series (same outputs, bit for bit),
// groups included; all or nothing on bad input; the values are copied (the caller's array holds +inf from before the
// forecast to after it: a library that kept the pointer would refuse the request).
TEST_F(Fixture, AddSeriesBatchEqualsOneByOne) {
    constexpr size_t kN = 5, kL = 48;
    std::vector<float> block;
    for (size_t i = 0; i < kN; ++i) {
        const auto v = series(kL, 0.6f * static_cast<float>(i));
        block.insert(block.end(), v.begin(), v.end());
    }
    const int64_t groups[kN] = {-1, 3, 3, -1, 0};
    size_t first = 99;
    std::vector<float> caller = block;
    ASSERT_EQ(cn_forecast_request_add_series_batch(req, caller.data(), kN, kL, groups, &first, err), CN_STATUS_OK) << msg();
    std::fill(caller.begin(), caller.end(), std::numeric_limits<float>::infinity());
    EXPECT_EQ(first, 0u);
    // Refused calls add nothing: a bad group at index 2, a NULL array, too many series.
    const int64_t bad[kN] = {-1, 0, -2, 0, -1};
    EXPECT_EQ(cn_forecast_request_add_series_batch(req, block.data(), kN, kL, bad, nullptr, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "groups[2]: must be -1 (own task) or >= 0");
    EXPECT_EQ(cn_forecast_request_add_series_batch(req, nullptr, kN, kL, nullptr, nullptr, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_forecast_request_add_series_batch(req, block.data(), size_t{1} << 20, kL, nullptr, nullptr, err),
              CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "n_series: 1048576 more series would pass the limit of 1048576 per request");
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 8, err), CN_STATUS_OK);
    std::vector<float> batched;
    ASSERT_EQ(run(&batched), CN_STATUS_OK) << msg();
    ASSERT_EQ(batched.size(), kN * 21 * 8);

    cn_forecast_request* one = nullptr;
    ASSERT_EQ(cn_forecast_request_create(&one, err), CN_STATUS_OK);
    for (size_t i = 0; i < kN; ++i) {
        size_t index = 99;
        ASSERT_EQ(cn_forecast_request_add_series(one, block.data() + i * kL, kL, groups[i], &index, err), CN_STATUS_OK);
        EXPECT_EQ(index, i);
    }
    ASSERT_EQ(cn_forecast_request_set_horizon(one, 8, err), CN_STATUS_OK);
    std::vector<float> separate(batched.size(), kNaN);
    ASSERT_EQ(cn_forecast(model, one, nullptr, separate.data(), separate.size(), nullptr, 0, err), CN_STATUS_OK) << msg();
    for (size_t k = 0; k < batched.size(); ++k) ASSERT_EQ(std::memcmp(&batched[k], &separate[k], sizeof(float)), 0) << k;
    // A second batch continues the indices.
    ASSERT_EQ(cn_forecast_request_add_series_batch(one, block.data(), 2, kL, nullptr, &first, err), CN_STATUS_OK);
    EXPECT_EQ(first, kN);
    cn_forecast_request_free(one);
}

TEST_F(Fixture, BufferTooSmallAndSamples) {
    add(series(30));
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 8, err), CN_STATUS_OK);
    std::vector<float> small(10);
    EXPECT_EQ(cn_forecast(model, req, nullptr, small.data(), small.size(), nullptr, 0, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "out: buffer holds 10 floats, the forecast needs 168");
    std::vector<float> out(168), samples(8);
    EXPECT_EQ(cn_forecast(model, req, nullptr, out.data(), out.size(), samples.data(), samples.size(), err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_forecast(model, req, nullptr, nullptr, 168, nullptr, 0, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(msg(), "out is NULL");
}

TEST_F(Fixture, DefaultQuantilesAndShape) {
    add(series(50));
    add(series(20, 1.0f));
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 40, err), CN_STATUS_OK);  // past the native 32: rollout
    cn_forecast_shape s;
    cn_forecast_shape_init(&s);
    ASSERT_EQ(cn_forecast_get_shape(model, req, &s, err), CN_STATUS_OK);
    EXPECT_EQ(s.n_series, 2u);
    EXPECT_EQ(s.n_outputs, 21u);
    EXPECT_EQ(s.horizon, 40u);
    EXPECT_EQ(s.n_values, 2u * 21u * 40u);
    EXPECT_EQ(s.n_samples, 0u);
    std::vector<float> out;
    ASSERT_EQ(run(&out), CN_STATUS_OK) << msg();
    for (float x : out) ASSERT_TRUE(std::isfinite(x));
}

TEST_F(Fixture, CancelAndDeadline) {
    add(series(60));
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 8, err), CN_STATUS_OK);
    cn_run_options* opts = nullptr;
    ASSERT_EQ(cn_run_options_create(&opts, err), CN_STATUS_OK);
    cn_run_options_cancel(opts);
    EXPECT_EQ(run(nullptr, opts), CN_STATUS_CANCELLED);
    EXPECT_EQ(msg(), "cancelled by the caller");
    cn_run_options_reset(opts);
    std::vector<float> out;
    ASSERT_EQ(run(&out, opts), CN_STATUS_OK) << msg();
    uint64_t done = 0, total = 0;
    ASSERT_EQ(cn_run_options_get_progress(opts, &done, &total, err), CN_STATUS_OK);
    EXPECT_EQ(done, 1u);
    EXPECT_EQ(total, 1u);
    // A deadline already over by the first check (1 ms, and a long rollout) ends the call.
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 4000, err), CN_STATUS_OK);
    ASSERT_EQ(cn_run_options_set_timeout_ms(opts, 1, err), CN_STATUS_OK);
    EXPECT_EQ(run(nullptr, opts), CN_STATUS_DEADLINE_EXCEEDED);
    cn_run_options_free(opts);
}

// Batch invariance: a series' forecast does not depend on what else is in the call, bit for bit, as
// long as the padded length is the same (every layer runs per series; see chronos2_forward.cpp). This is
// what lets the server merge requests. Here: four series of equal length in one call vs four calls, and
// a multivariate group next to a univariate series vs alone.
void batched_equals_single(Fixture& f, std::vector<float>* keep = nullptr) {
    auto [model, err, req] = std::tie(f.model, f.err, f.req);
    auto series = [&](size_t n, float ph) { return f.series(n, ph); };
    auto add = [&](const std::vector<float>& v, int64_t g = -1) { f.add(v, g); };
    auto run = [&](std::vector<float>* o) { return f.run(o); };
    auto msg = [&] { return f.msg(); };
    std::vector<std::vector<float>> all;
    for (int i = 0; i < 4; ++i) all.push_back(series(64, 0.7f * i));
    for (const auto& v : all) add(v);
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 40, err), CN_STATUS_OK);  // includes a rollout step
    std::vector<float> batched;
    ASSERT_EQ(run(&batched), CN_STATUS_OK) << msg();
    if (keep) *keep = batched;
    const size_t per = batched.size() / 4;
    for (int i = 0; i < 4; ++i) {
        cn_forecast_request* one = nullptr;
        cn_forecast_request_create(&one, err);
        cn_forecast_request_add_series(one, all[i].data(), all[i].size(), -1, nullptr, err);
        cn_forecast_request_set_horizon(one, 40, err);
        std::vector<float> out(per);
        ASSERT_EQ(cn_forecast(model, one, nullptr, out.data(), out.size(), nullptr, 0, err), CN_STATUS_OK);
        for (size_t k = 0; k < per; ++k) ASSERT_EQ(out[k], batched[i * per + k]) << "series " << i << " value " << k;
        cn_forecast_request_free(one);
    }
}

void group_next_to_other_tasks(Fixture& f, std::vector<float>* keep = nullptr) {
    auto [model, err, req] = std::tie(f.model, f.err, f.req);
    auto series = [&](size_t n, float ph) { return f.series(n, ph); };
    auto add = [&](const std::vector<float>& v, int64_t g = -1) { f.add(v, g); };
    auto run = [&](std::vector<float>* o) { return f.run(o); };
    auto msg = [&] { return f.msg(); };
    const auto a = series(48, 0.1f), b = series(48, 0.9f), c = series(48, 2.0f);
    add(a, 7);
    add(b, 7);
    add(c);
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 8, err), CN_STATUS_OK);
    std::vector<float> mixed;
    ASSERT_EQ(run(&mixed), CN_STATUS_OK) << msg();
    if (keep) *keep = mixed;
    cn_forecast_request* g = nullptr;
    cn_forecast_request_create(&g, err);
    cn_forecast_request_add_series(g, a.data(), a.size(), 0, nullptr, err);
    cn_forecast_request_add_series(g, b.data(), b.size(), 0, nullptr, err);
    cn_forecast_request_set_horizon(g, 8, err);
    std::vector<float> alone(mixed.size() / 3 * 2);
    ASSERT_EQ(cn_forecast(model, g, nullptr, alone.data(), alone.size(), nullptr, 0, err), CN_STATUS_OK);
    for (size_t k = 0; k < alone.size(); ++k) ASSERT_EQ(alone[k], mixed[k]) << k;
    cn_forecast_request_free(g);
}

// Every layer runs per series, in eager mode and in fused mode (whose kernels reduce per row).
TEST_F(Fixture, BatchedEqualsSingleExactly) { batched_equals_single(*this); }
TEST_F(Fixture, GroupNextToOtherTasksExactly) { group_next_to_other_tasks(*this); }
TEST_F(Fixture, FusedBatchedEqualsSingleExactly) {
    ASSERT_EQ(cn_model_set_mode(model, CN_MODE_FUSED, err), CN_STATUS_OK) << msg();
    batched_equals_single(*this);
}
TEST_F(Fixture, FusedGroupNextToOtherTasksExactly) {
    ASSERT_EQ(cn_model_set_mode(model, CN_MODE_FUSED, err), CN_STATUS_OK) << msg();
    group_next_to_other_tasks(*this);
}

// More series than one batch holds (the pipeline's batches of 256 rows; the host prepares the next batch while
// the device runs the current one): every series at a batch edge, and a sample in between, equals its single call.
TEST_F(Fixture, SeveralBatchesEqualSinglesExactly) {
    for (cn_mode mode : {CN_MODE_EAGER, CN_MODE_FUSED}) {
        SCOPED_TRACE(cn_mode_name(mode));
        ASSERT_EQ(cn_model_set_mode(model, mode, err), CN_STATUS_OK) << msg();
        cn_forecast_request_free(req);
        req = nullptr;
        ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);
        std::vector<std::vector<float>> all;
        for (int i = 0; i < 520; ++i) all.push_back(series(40, 0.013f * static_cast<float>(i)));
        for (const auto& v : all) add(v);
        ASSERT_EQ(cn_forecast_request_set_horizon(req, 8, err), CN_STATUS_OK);
        std::vector<float> batched;
        ASSERT_EQ(run(&batched), CN_STATUS_OK) << msg();
        const size_t per = batched.size() / all.size();
        for (size_t i : {size_t{0}, size_t{1}, size_t{100}, size_t{255}, size_t{256}, size_t{257}, size_t{400}, size_t{511}, size_t{512},
                         size_t{519}}) {
            cn_forecast_request* one = nullptr;
            ASSERT_EQ(cn_forecast_request_create(&one, err), CN_STATUS_OK);
            cn_forecast_request_add_series(one, all[i].data(), all[i].size(), -1, nullptr, err);
            cn_forecast_request_set_horizon(one, 8, err);
            std::vector<float> out(per);
            ASSERT_EQ(cn_forecast(model, one, nullptr, out.data(), out.size(), nullptr, 0, err), CN_STATUS_OK) << msg();
            for (size_t k = 0; k < per; ++k) ASSERT_EQ(out[k], batched[i * per + k]) << "series " << i << " value " << k;
            cn_forecast_request_free(one);
        }
    }
}

// With 1, 2 and 4 CPU threads: batched equals single for each, and the answers are the same bits for every
// thread count (MKL's CNR AUTO set by the library, single-threaded GEMM blocks: kernels/series_linear.h).
struct ThreadCounts : Fixture {
    void recreate(int32_t threads, cn_mode mode) {
        cn_forecast_request_free(req);
        cn_model_free(model);
        req = nullptr;
        model = nullptr;
        cn_model_params p;
        cn_model_params_init(&p);
        p.n_threads = threads;
        p.mode = mode;
        ASSERT_EQ(cn_model_create(kTinyA.c_str(), &p, &model, err), CN_STATUS_OK) << msg();
        ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);
    }
};

TEST_F(ThreadCounts, BatchInvariantAndTheSameForEveryThreadCount) {
    const bool thread_invariant = (cn_cpu_numerics(nullptr) & CN_CPU_THREAD_INVARIANT) != 0;
    for (cn_mode mode : {CN_MODE_EAGER, CN_MODE_FUSED}) {
        std::vector<float> first_batched, first_group;
        for (int32_t threads : {1, 2, 4}) {
            SCOPED_TRACE(std::string(cn_mode_name(mode)) + ", " + std::to_string(threads) + " threads");
            std::vector<float> batched, group;
            recreate(threads, mode);
            batched_equals_single(*this, &batched);
            recreate(threads, mode);
            group_next_to_other_tasks(*this, &group);
            if (HasFatalFailure()) return;
            if (first_batched.empty()) {
                first_batched = batched;
                first_group = group;
            } else if (thread_invariant) {
                ASSERT_EQ(batched.size(), first_batched.size());
                for (size_t k = 0; k < batched.size(); ++k) ASSERT_EQ(batched[k], first_batched[k]) << k;
                for (size_t k = 0; k < group.size(); ++k) ASSERT_EQ(group[k], first_group[k]) << k;
            }
        }
    }
    if (!thread_invariant)
        GTEST_SKIP() << "CPU results may depend on the thread count here: " << [] {
            const char* d = nullptr;
            cn_cpu_numerics(&d);
            return std::string(d);
        }();
}

TEST(Chronos2Checkpoint, ShapeDisagreeingWithConfigNamesTheTensor) {
    cn::test::TempDir d;
    // The reference checkpoint with its config claiming a wider feed-forward layer.
    std::string cfg = cn::test::read_file(kTinyA + "/config.json");
    const size_t at = cfg.find("\"d_ff\": 64");
    ASSERT_NE(at, std::string::npos);
    cfg.replace(at, 10, "\"d_ff\": 65");
    cn::test::write_file(d.file("config.json"), cfg);
    cn::test::write_file(d.file("model.safetensors"), cn::test::read_file(kTinyA + "/model.safetensors"));
    cn_error* err = nullptr;
    cn_error_create(&err);
    cn_model* m = nullptr;
    EXPECT_EQ(cn_model_create(d.path().c_str(), nullptr, &m, err), CN_STATUS_MODEL_FORMAT);
    EXPECT_NE(std::string(cn_error_message(err))
                  .find("tensor \"encoder.block.0.layer.2.mlp.wi.weight\" has shape [64, 32] but the config implies [65, 32]"),
              std::string::npos)
        << cn_error_message(err);
    EXPECT_EQ(m, nullptr);
    cn_error_free(err);
}

}  // namespace

namespace {

// A task whose series have different lengths: shorter series are left-padded with NaN (right-aligned, as
// the reference aligns ragged rows), also when the longest is cut to the context length. Equivalent to
// the caller padding them with NaN.
TEST_F(Fixture, RaggedGroupEqualsExplicitPadding) {
    const auto a = series(300, 0.1f);  // longer than tiny_a's context length (128)
    const auto b = series(90, 1.3f);
    add(a, 1);
    add(b, 1);
    ASSERT_EQ(cn_forecast_request_set_horizon(req, 8, err), CN_STATUS_OK);
    std::vector<float> ragged;
    ASSERT_EQ(run(&ragged), CN_STATUS_OK) << msg();

    std::vector<float> padded_b(300 - 90, kNaN);
    padded_b.insert(padded_b.end(), b.begin(), b.end());
    cn_forecast_request* p = nullptr;
    cn_forecast_request_create(&p, err);
    cn_forecast_request_add_series(p, a.data(), a.size(), 1, nullptr, err);
    cn_forecast_request_add_series(p, padded_b.data(), padded_b.size(), 1, nullptr, err);
    cn_forecast_request_set_horizon(p, 8, err);
    std::vector<float> out(ragged.size());
    ASSERT_EQ(cn_forecast(model, p, nullptr, out.data(), out.size(), nullptr, 0, err), CN_STATUS_OK);
    for (size_t k = 0; k < out.size(); ++k) ASSERT_EQ(out[k], ragged[k]) << k;
    cn_forecast_request_free(p);
}

}  // namespace
