// Every exported C function, called with NULL handles, NULL pointers and garbage values, must answer
// with a status (or, for void functions, simply return) and never crash. check_symbols.cmake checks
// that every symbol libcutenative.so exports is named in this file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cutenative.h"

namespace {

struct Case {
    const char* function;
    std::function<cn_status(cn_error*)> call;
    cn_status expected;
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST(CApiNullTable, EveryFunctionReturnsAStatus) {
    // Real objects to pair with NULLs, so each argument is tested on its own.
    cn_forecast_request* req = nullptr;
    ASSERT_EQ(cn_forecast_request_create(&req, nullptr), CN_STATUS_OK);
    cn_generate_request* greq = nullptr;
    ASSERT_EQ(cn_generate_request_create(&greq, nullptr), CN_STATUS_OK);
    cn_run_options* opts = nullptr;
    ASSERT_EQ(cn_run_options_create(&opts, nullptr), CN_STATUS_OK);
    const float values[3] = {1, 2, 3};
    float out[8];
    size_t n = 0;
    cn_model_params params;
    cn_model_params_init(&params);
    cn_model_info info;
    cn_model_info_init(&info);
    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    const char* texts[1] = {"hello"};
    cn_dtype dt;
    cn_mode md;
    uint8_t pixels[16];
    cn_model* model_out = reinterpret_cast<cn_model*>(0x1);  // must be reset to NULL on failure
    cn_adapter* adapter_out = reinterpret_cast<cn_adapter*>(0x1);
    cn_adapter_params aparams;
    cn_adapter_params_init(&aparams);
    cn_adapter_info ainfo;
    cn_adapter_info_init(&ainfo);
    cn_adapter_stats astats;
    cn_adapter_stats_init(&astats);
    cn_call_timings timings;
    cn_call_timings_init(&timings);
    cn_call_timings small_timings;
    cn_call_timings_init(&small_timings);
    small_timings.struct_size = 8;

    const auto INV = CN_STATUS_INVALID_ARGUMENT;
    const std::vector<Case> cases = {
        {"cn_error_create", [](cn_error*) { return cn_error_create(nullptr); }, INV},
        {"cn_dtype_from_name", [&](cn_error*) { return cn_dtype_from_name(nullptr, &dt); }, INV},
        {"cn_dtype_from_name", [&](cn_error*) { return cn_dtype_from_name("f64", &dt); }, INV},
        {"cn_dtype_from_name", [&](cn_error*) { return cn_dtype_from_name("f32", nullptr); }, INV},
        {"cn_mode_from_name", [&](cn_error*) { return cn_mode_from_name(nullptr, &md); }, INV},
        {"cn_mode_from_name", [&](cn_error*) { return cn_mode_from_name("turbo", &md); }, INV},
        {"cn_model_create", [&](cn_error* e) { return cn_model_create(nullptr, nullptr, &model_out, e); }, INV},
        {"cn_model_create", [&](cn_error* e) { return cn_model_create("/tmp", nullptr, nullptr, e); }, INV},
        {"cn_model_create", [&](cn_error* e) { return cn_model_create("", nullptr, &model_out, e); }, INV},
        {"cn_model_create", [&](cn_error* e) { return cn_model_create("/nonexistent/x", nullptr, &model_out, e); }, CN_STATUS_NOT_FOUND},
        {"cn_model_create",
         [&](cn_error* e) {
             cn_model_params p = params;
             p.struct_size = 0;
             return cn_model_create("/tmp", &p, &model_out, e);
         },
         INV},
        {"cn_model_create",
         [&](cn_error* e) {
             cn_model_params p = params;
             p.device_type = 7;
             return cn_model_create("/tmp", &p, &model_out, e);
         },
         INV},
        {"cn_model_create",
         [&](cn_error* e) {
             cn_model_params p = params;
             p.dtype = -3;
             return cn_model_create("/tmp", &p, &model_out, e);
         },
         INV},
        {"cn_model_create",
         [&](cn_error* e) {
             cn_model_params p = params;
             p.mode = 42;
             return cn_model_create("/tmp", &p, &model_out, e);
         },
         INV},
        {"cn_model_create",
         [&](cn_error* e) {
             cn_model_params p = params;
             p.n_threads = -1;
             return cn_model_create("/tmp", &p, &model_out, e);
         },
         INV},
        {"cn_model_get_info", [&](cn_error* e) { return cn_model_get_info(nullptr, &info, e); }, INV},
        {"cn_model_describe", [&](cn_error* e) { return cn_model_describe(nullptr, nullptr, 0, &n, e); }, INV},
        {"cn_model_get_quantiles", [&](cn_error* e) { return cn_model_get_quantiles(nullptr, out, 8, &n, e); }, INV},
        {"cn_model_set_mode", [&](cn_error* e) { return cn_model_set_mode(nullptr, CN_MODE_GRAPH, e); }, INV},
        {"cn_model_get_mode", [&](cn_error* e) { return cn_model_get_mode(nullptr, &md, e); }, INV},
        {"cn_run_options_create", [](cn_error* e) { return cn_run_options_create(nullptr, e); }, INV},
        {"cn_run_options_set_timeout_ms", [](cn_error* e) { return cn_run_options_set_timeout_ms(nullptr, 5, e); }, INV},
        {"cn_run_options_set_timeout_ms", [&](cn_error* e) { return cn_run_options_set_timeout_ms(opts, -5, e); }, INV},
        {"cn_run_options_set_seed", [](cn_error* e) { return cn_run_options_set_seed(nullptr, 5, e); }, INV},
        {"cn_run_options_get_progress", [](cn_error* e) { return cn_run_options_get_progress(nullptr, nullptr, nullptr, e); }, INV},
        {"cn_forecast_request_create", [](cn_error* e) { return cn_forecast_request_create(nullptr, e); }, INV},
        {"cn_forecast_request_add_series", [&](cn_error* e) { return cn_forecast_request_add_series(nullptr, values, 3, -1, nullptr, e); },
         INV},
        {"cn_forecast_request_add_series", [&](cn_error* e) { return cn_forecast_request_add_series(req, nullptr, 3, -1, nullptr, e); },
         INV},
        {"cn_forecast_request_add_series", [&](cn_error* e) { return cn_forecast_request_add_series(req, values, 0, -1, nullptr, e); },
         INV},
        {"cn_forecast_request_add_series", [&](cn_error* e) { return cn_forecast_request_add_series(req, values, 3, -7, nullptr, e); },
         INV},
        {"cn_forecast_request_add_series",
         [&](cn_error* e) { return cn_forecast_request_add_series(req, values, SIZE_MAX, -1, nullptr, e); }, INV},
        {"cn_forecast_request_add_series_batch",
         [&](cn_error* e) { return cn_forecast_request_add_series_batch(nullptr, values, 1, 3, nullptr, nullptr, e); }, INV},
        {"cn_forecast_request_add_series_batch",
         [&](cn_error* e) { return cn_forecast_request_add_series_batch(req, nullptr, 1, 3, nullptr, nullptr, e); }, INV},
        {"cn_forecast_request_add_series_batch",
         [&](cn_error* e) { return cn_forecast_request_add_series_batch(req, values, 0, 3, nullptr, nullptr, e); }, INV},
        {"cn_forecast_request_add_series_batch",
         [&](cn_error* e) { return cn_forecast_request_add_series_batch(req, values, 1, 0, nullptr, nullptr, e); }, INV},
        {"cn_forecast_request_add_series_batch",
         [&](cn_error* e) {
             const int64_t bad_group[1] = {-7};
             return cn_forecast_request_add_series_batch(req, values, 1, 3, bad_group, nullptr, e);
         },
         INV},
        {"cn_forecast_request_add_series_batch",
         [&](cn_error* e) { return cn_forecast_request_add_series_batch(req, values, SIZE_MAX, 3, nullptr, nullptr, e); }, INV},
        {"cn_forecast_request_add_series_batch",
         [&](cn_error* e) { return cn_forecast_request_add_series_batch(req, values, 1, SIZE_MAX, nullptr, nullptr, e); }, INV},
        {"cn_forecast_request_add_covariate",
         [&](cn_error* e) { return cn_forecast_request_add_covariate(nullptr, 0, values, 3, nullptr, 0, e); }, INV},
        {"cn_forecast_request_add_covariate",
         [&](cn_error* e) { return cn_forecast_request_add_covariate(req, 99, values, 3, nullptr, 0, e); }, INV},
        {"cn_forecast_request_add_categorical_covariate",
         [&](cn_error* e) { return cn_forecast_request_add_categorical_covariate(nullptr, 0, texts, 1, nullptr, 0, e); }, INV},
        {"cn_forecast_request_add_categorical_covariate",
         [&](cn_error* e) { return cn_forecast_request_add_categorical_covariate(req, 0, nullptr, 1, nullptr, 0, e); }, INV},
        {"cn_forecast_request_set_timestamps",
         [&](cn_error* e) { return cn_forecast_request_set_timestamps(nullptr, 0, nullptr, 0, nullptr, 0, e); }, INV},
        {"cn_forecast_request_set_horizon", [](cn_error* e) { return cn_forecast_request_set_horizon(nullptr, 4, e); }, INV},
        {"cn_forecast_request_set_horizon", [&](cn_error* e) { return cn_forecast_request_set_horizon(req, 0, e); }, INV},
        {"cn_forecast_request_set_horizon", [&](cn_error* e) { return cn_forecast_request_set_horizon(req, -4, e); }, INV},
        {"cn_forecast_request_set_horizon", [&](cn_error* e) { return cn_forecast_request_set_horizon(req, INT64_MAX, e); }, INV},
        {"cn_forecast_request_set_quantiles", [&](cn_error* e) { return cn_forecast_request_set_quantiles(nullptr, values, 1, e); }, INV},
        {"cn_forecast_request_set_quantiles", [&](cn_error* e) { return cn_forecast_request_set_quantiles(req, nullptr, 1, e); }, INV},
        {"cn_forecast_request_set_quantiles",
         [&](cn_error* e) {
             const float q[2] = {0.5f, kNaN};
             return cn_forecast_request_set_quantiles(req, q, 2, e);
         },
         INV},
        {"cn_forecast_request_set_quantiles",
         [&](cn_error* e) {
             const float q[2] = {0.9f, 1.5f};
             return cn_forecast_request_set_quantiles(req, q, 2, e);
         },
         INV},
        {"cn_forecast_request_set_sampling", [](cn_error* e) { return cn_forecast_request_set_sampling(nullptr, 1, 0, 1, 1, e); }, INV},
        {"cn_forecast_request_set_sampling", [&](cn_error* e) { return cn_forecast_request_set_sampling(req, kNaN, 0, 1, 1, e); }, INV},
        {"cn_forecast_request_set_sampling", [&](cn_error* e) { return cn_forecast_request_set_sampling(req, 1, -1, 1, 1, e); }, INV},
        {"cn_forecast_request_set_sampling", [&](cn_error* e) { return cn_forecast_request_set_sampling(req, 1, 0, 1.5f, 1, e); }, INV},
        {"cn_forecast_request_set_sampling", [&](cn_error* e) { return cn_forecast_request_set_sampling(req, 1, 0, 1, 0, e); }, INV},
        {"cn_forecast_request_set_decoding", [](cn_error* e) { return cn_forecast_request_set_decoding(nullptr, 0, 1, 0, e); }, INV},
        {"cn_forecast_request_set_decoding", [&](cn_error* e) { return cn_forecast_request_set_decoding(req, -1, 1, 0, e); }, INV},
        {"cn_forecast_request_set_decoding", [&](cn_error* e) { return cn_forecast_request_set_decoding(req, 0, 2, 0, e); }, INV},
        {"cn_forecast_request_set_decoding", [&](cn_error* e) { return cn_forecast_request_set_decoding(req, 4097, 1, 0, e); }, INV},
        {"cn_forecast_request_set_decoding", [&](cn_error* e) { return cn_forecast_request_set_decoding(req, 0, 1, 2, e); }, INV},
        {"cn_forecast_get_shape", [&](cn_error* e) { return cn_forecast_get_shape(nullptr, req, &shape, e); }, INV},
        {"cn_forecast", [&](cn_error* e) { return cn_forecast(nullptr, req, opts, out, 8, nullptr, 0, e); }, INV},
        {"cn_embed", [&](cn_error* e) { return cn_embed(nullptr, texts, 1, opts, out, 8, e); }, INV},
        {"cn_generate_request_create", [](cn_error* e) { return cn_generate_request_create(nullptr, e); }, INV},
        {"cn_generate_request_set_prompt", [](cn_error* e) { return cn_generate_request_set_prompt(nullptr, "x", nullptr, e); }, INV},
        {"cn_generate_request_set_prompt", [&](cn_error* e) { return cn_generate_request_set_prompt(greq, nullptr, nullptr, e); }, INV},
        {"cn_generate_request_set_size", [](cn_error* e) { return cn_generate_request_set_size(nullptr, 64, 64, e); }, INV},
        {"cn_generate_request_set_size", [&](cn_error* e) { return cn_generate_request_set_size(greq, 4097, 64, e); }, INV},
        {"cn_generate_request_set_size", [&](cn_error* e) { return cn_generate_request_set_size(greq, 64, -64, e); }, INV},
        {"cn_generate_request_set_steps", [](cn_error* e) { return cn_generate_request_set_steps(nullptr, 4, 0, e); }, INV},
        {"cn_generate_request_set_steps", [&](cn_error* e) { return cn_generate_request_set_steps(greq, 0, 0, e); }, INV},
        {"cn_generate_request_set_steps", [&](cn_error* e) { return cn_generate_request_set_steps(greq, -2, 0, e); }, INV},
        {"cn_generate_request_set_steps", [&](cn_error* e) { return cn_generate_request_set_steps(greq, 4, kNaN, e); }, INV},
        {"cn_generate_request_set_cfg", [](cn_error* e) { return cn_generate_request_set_cfg(nullptr, 1.0, 0.0, e); }, INV},
        {"cn_generate_request_set_cfg", [&](cn_error* e) { return cn_generate_request_set_cfg(greq, kNaN, 0.0, e); }, INV},
        {"cn_generate_request_set_cfg", [&](cn_error* e) { return cn_generate_request_set_cfg(greq, 1.0, -0.5, e); }, INV},
        {"cn_generate_request_set_count", [](cn_error* e) { return cn_generate_request_set_count(nullptr, 1, e); }, INV},
        {"cn_generate_request_set_count", [&](cn_error* e) { return cn_generate_request_set_count(greq, 0, e); }, INV},
        {"cn_generate_request_set_count", [&](cn_error* e) { return cn_generate_request_set_count(greq, CN_GENERATE_MAX_COUNT + 1, e); },
         INV},
        {"cn_generate_request_set_lora", [](cn_error* e) { return cn_generate_request_set_lora(nullptr, "x", 1, e); }, INV},
        {"cn_generate_request_set_lora", [&](cn_error* e) { return cn_generate_request_set_lora(greq, "x", kNaN, e); }, INV},
        {"cn_generate_get_size", [&](cn_error* e) { return cn_generate_get_size(nullptr, greq, &n, e); }, INV},
        {"cn_generate", [&](cn_error* e) { return cn_generate(nullptr, greq, opts, pixels, 16, e); }, INV},
        {"cn_adapter_load", [&](cn_error* e) { return cn_adapter_load(nullptr, "x", &aparams, &adapter_out, e); }, INV},
        {"cn_adapter_get_info", [&](cn_error* e) { return cn_adapter_get_info(nullptr, &ainfo, e); }, INV},
        {"cn_generate_request_add_adapter", [&](cn_error* e) { return cn_generate_request_add_adapter(greq, nullptr, 1, e); }, INV},
        {"cn_generate_request_add_adapter", [&](cn_error* e) { return cn_generate_request_add_adapter(nullptr, nullptr, 1, e); }, INV},
        {"cn_generate_request_clear_adapters", [](cn_error* e) { return cn_generate_request_clear_adapters(nullptr, e); }, INV},
        {"cn_model_get_adapter_stats", [&](cn_error* e) { return cn_model_get_adapter_stats(nullptr, &astats, e); }, INV},
        {"cn_run_options_get_timings", [&](cn_error* e) { return cn_run_options_get_timings(nullptr, &timings, e); }, INV},
        {"cn_run_options_get_timings", [&](cn_error* e) { return cn_run_options_get_timings(opts, nullptr, e); }, INV},
        {"cn_run_options_get_timings", [&](cn_error* e) { return cn_run_options_get_timings(opts, &small_timings, e); }, INV},
    };

    cn_error* err = nullptr;
    ASSERT_EQ(cn_error_create(&err), CN_STATUS_OK);
    for (const auto& c : cases) {
        SCOPED_TRACE(c.function);
        // With an error object: the status is stored with a message.
        const cn_status s = c.call(err);
        EXPECT_EQ(s, c.expected) << cn_error_message(err);
        const bool takes_error =
            std::string(c.function) != "cn_error_create" && std::string(c.function).find("_from_name") == std::string::npos;
        if (takes_error) {
            EXPECT_EQ(cn_error_status(err), c.expected);
            EXPECT_STRNE(cn_error_message(err), "") << "a failure must carry a message";
        }
        // Without one: same status.
        EXPECT_EQ(c.call(nullptr), c.expected);
    }
    EXPECT_EQ(model_out, nullptr) << "cn_model_create must reset *out on failure";
    EXPECT_EQ(adapter_out, nullptr) << "cn_adapter_load must reset *out on failure";

    // Void and infallible functions: NULL is accepted, garbage enums get "unknown".
    cn_error_free(nullptr);
    cn_error_clear(nullptr);
    EXPECT_EQ(cn_error_status(nullptr), CN_STATUS_OK);
    EXPECT_STREQ(cn_error_message(nullptr), "");
    cn_model_free(nullptr);
    cn_model_params_init(nullptr);
    cn_model_info_init(nullptr);
    cn_forecast_shape_init(nullptr);
    cn_run_options_free(nullptr);
    cn_run_options_cancel(nullptr);
    cn_run_options_reset(nullptr);
    cn_forecast_request_free(nullptr);
    cn_generate_request_free(nullptr);
    cn_adapter_free(nullptr);
    cn_adapter_params_init(nullptr);
    cn_adapter_info_init(nullptr);
    cn_adapter_stats_init(nullptr);
    cn_call_timings_init(nullptr);
    cn_abi_version(nullptr, nullptr);
    EXPECT_STREQ(cn_status_name(static_cast<cn_status>(999)), "UNKNOWN");
    EXPECT_STREQ(cn_device_type_name(static_cast<cn_device_type>(-1)), "unknown");
    EXPECT_STREQ(cn_dtype_name(static_cast<cn_dtype>(77)), "unknown");
    EXPECT_STREQ(cn_model_kind_name(static_cast<cn_model_kind>(77)), "unknown");
    EXPECT_STREQ(cn_mode_name(static_cast<cn_mode>(77)), "unknown");
    EXPECT_GE(cn_cuda_device_count(), 0);
    EXPECT_NE(cn_version(), nullptr);
    EXPECT_NE(cn_build_info(), nullptr);
    EXPECT_LE(cn_cpu_numerics(nullptr), CN_CPU_BATCH_INVARIANT | CN_CPU_THREAD_INVARIANT);

    cn_error_free(err);
    cn_run_options_free(opts);
    cn_generate_request_free(greq);
    cn_forecast_request_free(req);
}

TEST(CApiErrors, ErrorObjectLifecycle) {
    cn_error* err = nullptr;
    ASSERT_EQ(cn_error_create(&err), CN_STATUS_OK);
    EXPECT_EQ(cn_error_status(err), CN_STATUS_OK);
    EXPECT_STREQ(cn_error_message(err), "");
    EXPECT_EQ(cn_forecast_request_set_horizon(nullptr, 1, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_STREQ(cn_error_message(err), "req is NULL");
    cn_forecast_request* req = nullptr;
    ASSERT_EQ(cn_forecast_request_create(&req, err), CN_STATUS_OK);
    EXPECT_EQ(cn_error_status(err), CN_STATUS_OK) << "success clears the error";
    EXPECT_STREQ(cn_error_message(err), "");
    EXPECT_EQ(cn_forecast_request_set_horizon(req, 0, err), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_STREQ(cn_error_message(err), "horizon: must be in [1, 1048576], got 0");
    cn_error_clear(err);
    EXPECT_EQ(cn_error_status(err), CN_STATUS_OK);
    cn_forecast_request_free(req);
    cn_error_free(err);
}

TEST(CApiVersions, AbiAndNames) {
    uint32_t major = 99, minor = 99;
    cn_abi_version(&major, &minor);
    EXPECT_EQ(major, static_cast<uint32_t>(CN_ABI_VERSION_MAJOR));
    EXPECT_EQ(minor, static_cast<uint32_t>(CN_ABI_VERSION_MINOR));
    EXPECT_STREQ(cn_status_name(CN_STATUS_MODEL_FORMAT), "MODEL_FORMAT");
    EXPECT_STREQ(cn_status_name(CN_STATUS_BUSY), "BUSY");
    cn_dtype dt = CN_DTYPE_F32;
    EXPECT_EQ(cn_dtype_from_name("bf16", &dt), CN_STATUS_OK);
    EXPECT_EQ(dt, CN_DTYPE_BF16);
    cn_mode md = CN_MODE_EAGER;
    EXPECT_EQ(cn_mode_from_name("graph", &md), CN_STATUS_OK);
    EXPECT_EQ(md, CN_MODE_GRAPH);
    EXPECT_NE(std::string(cn_build_info()).find(cn_version()), std::string::npos);
}

// Loading the library sets MKL's reproducibility mode (AUTO) unless MKL_CBWR is set: with MKL (every x86-64
// LibTorch wheel), Chronos-2's CPU results are then batch- and thread-invariant, and the description says so.
TEST(CApiVersions, CpuNumericsAreReproducible) {
    const char* d = nullptr;
    const uint32_t flags = cn_cpu_numerics(&d);
    ASSERT_NE(d, nullptr);
    const std::string desc = d;
    std::printf("[ cpu      ] %s\n", d);
    EXPECT_NE(desc.find("processor: "), std::string::npos) << desc;
    EXPECT_EQ(cn_cpu_numerics(nullptr), flags);
    if (desc.find("Math Kernel Library") == std::string::npos) GTEST_SKIP() << "LibTorch without MKL: " << desc;
    const char* env = std::getenv("MKL_CBWR");
    if (env && *env) {
        EXPECT_NE(flags & CN_CPU_BATCH_INVARIANT, 0u) << desc;  // any MKL_CBWR value selects a CNR branch
    } else {
        EXPECT_EQ(flags, CN_CPU_BATCH_INVARIANT | CN_CPU_THREAD_INVARIANT) << desc;
        EXPECT_NE(desc.find("CNR AUTO (set by cutenative)"), std::string::npos) << desc;
    }
}
