// The long calls: forecast, embed, generate. Each sets inference mode and the model's device for its own
// thread, marks itself in flight (so set_mode answers BUSY) and arms the run options.
#include <algorithm>
#include <string>
#include <vector>

#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>

#include "capi/capi_internal.h"

using cn::Status;
using cn::capi::guarded;
using cn::capi::require;

namespace {

// Runs `f(run)` as a call on `model`: inference mode, device guard, call scope, run options armed.
template <class F>
void run_call(cn_model* model, cn_run_options* opts, F&& f) {
    c10::InferenceMode inference;
    c10::OptionalDeviceGuard device_guard(model->impl->options().device);
    cn::Model::CallScope scope(*model->impl);
    cn::RunContext local;
    cn::RunContext& run = opts ? opts->ctx : local;
    run.begin();
    struct Finish {
        cn::RunContext& run;
        ~Finish() { run.finish(); }
    } finish{run};
    run.check();
    f(run);
}

}  // namespace

extern "C" {

void cn_forecast_shape_init(cn_forecast_shape* shape) {
    if (!shape) return;
    *shape = cn_forecast_shape{};
    shape->struct_size = sizeof(*shape);
}

namespace {

// The model's shape for req, refused beyond CN_FORECAST_MAX_VALUES (the caller allocates n_values floats).
cn::ForecastShape bounded_shape(const cn_model* model, const cn_forecast_request* req) {
    const cn::ForecastShape s = model->impl->forecast_shape(req->r);
    const uint64_t limit = CN_FORECAST_MAX_VALUES;
    // Each factor is bounded (series by memory, outputs by the level limit, horizon by 2^20), so the
    // products fit in 64 bits; check the factors anyway before multiplying.
    const bool huge = s.n_series > limit || s.n_outputs > limit || s.horizon > limit || s.n_samples > limit;
    if (huge || s.n_values() > limit || s.n_sample_values() > limit) {
        cn::fail(Status::kInvalidArgument,
                 "the forecast would hold " +
                     (huge ? std::string("more than 2^28") : std::to_string(std::max(s.n_values(), s.n_sample_values()))) +
                     " values (series x outputs x horizon" + (s.n_samples ? std::string(" x samples") : std::string()) +
                     "), above the library's limit of " + std::to_string(limit) + " (CN_FORECAST_MAX_VALUES)");
    }
    return s;
}

}  // namespace

cn_status cn_forecast_get_shape(const cn_model* model, const cn_forecast_request* req, cn_forecast_shape* shape, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(req, "req");
        require(shape, "shape");
        if (shape->struct_size < sizeof(cn_forecast_shape)) {
            cn::fail(Status::kInvalidArgument, "shape: struct_size too small; initialise with cn_forecast_shape_init");
        }
        const cn::ForecastShape s = bounded_shape(model, req);
        shape->n_series = s.n_series;
        shape->n_outputs = s.n_outputs;
        shape->horizon = s.horizon;
        shape->n_values = s.n_values();
        shape->n_samples = s.n_samples;
        shape->n_sample_values = s.n_sample_values();
    });
}

cn_status cn_forecast(cn_model* model, const cn_forecast_request* req, cn_run_options* opts, float* out, size_t out_count, float* samples,
                      size_t samples_count, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(req, "req");
        require(out, "out");
        if (!samples && samples_count > 0) cn::fail(Status::kInvalidArgument, "samples is NULL but samples_count is not 0");
        (void)bounded_shape(model, req);
        run_call(model, opts, [&](cn::RunContext& run) { model->impl->forecast(req->r, run, out, out_count, samples, samples_count); });
    });
}

cn_status cn_embed(cn_model* model, const char* const* texts, size_t n_texts, cn_run_options* opts, float* out, size_t out_count,
                   cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(out, "out");
        if (n_texts == 0) cn::fail(Status::kInvalidArgument, "n_texts: at least one text is needed");
        require(texts, "texts");
        std::vector<std::string> copy;
        copy.reserve(n_texts);
        for (size_t i = 0; i < n_texts; ++i) {
            if (!texts[i]) cn::fail(Status::kInvalidArgument, "texts[" + std::to_string(i) + "] is NULL");
            copy.emplace_back(texts[i]);
        }
        run_call(model, opts, [&](cn::RunContext& run) { model->impl->embed(copy, run, out, out_count); });
    });
}

cn_status cn_generate_get_size(const cn_model* model, const cn_generate_request* req, size_t* bytes_out, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(req, "req");
        require(bytes_out, "bytes_out");
        *bytes_out = model->impl->generate_bytes(req->r);
    });
}

cn_status cn_generate(cn_model* model, const cn_generate_request* req, cn_run_options* opts, uint8_t* out, size_t out_bytes,
                      cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(req, "req");
        require(out, "out");
        run_call(model, opts, [&](cn::RunContext& run) { model->impl->generate(req->r, run, out, out_bytes); });
    });
}

}  // extern "C"
