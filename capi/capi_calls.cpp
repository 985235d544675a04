// The long calls: forecast, embed, generate. Each sets inference mode and the model's device for its own
// thread, marks itself in flight (so set_mode answers BUSY) and arms the run options.
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

cn_status cn_forecast_get_shape(const cn_model* model, const cn_forecast_request* req, cn_forecast_shape* shape,
                                cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(req, "req");
        require(shape, "shape");
        if (shape->struct_size < sizeof(cn_forecast_shape)) {
            cn::fail(Status::kInvalidArgument, "shape: struct_size too small; initialise with cn_forecast_shape_init");
        }
        const cn::ForecastShape s = model->impl->forecast_shape(req->r);
        shape->n_series = s.n_series;
        shape->n_outputs = s.n_outputs;
        shape->horizon = s.horizon;
        shape->n_values = s.n_values();
        shape->n_samples = s.n_samples;
        shape->n_sample_values = s.n_sample_values();
    });
}

cn_status cn_forecast(cn_model* model, const cn_forecast_request* req, cn_run_options* opts, float* out,
                      size_t out_count, float* samples, size_t samples_count, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(req, "req");
        require(out, "out");
        if (!samples && samples_count > 0) cn::fail(Status::kInvalidArgument, "samples is NULL but samples_count is not 0");
        run_call(model, opts, [&](cn::RunContext& run) {
            model->impl->forecast(req->r, run, out, out_count, samples, samples_count);
        });
    });
}

cn_status cn_embed(cn_model* model, const char* const* texts, size_t n_texts, cn_run_options* opts, float* out,
                   size_t out_count, cn_error* err) {
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

cn_status cn_generate(cn_model* model, const cn_generate_request* req, cn_run_options* opts, uint8_t* out,
                      size_t out_bytes, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(req, "req");
        require(out, "out");
        run_call(model, opts, [&](cn::RunContext& run) { model->impl->generate(req->r, run, out, out_bytes); });
    });
}

}  // extern "C"
