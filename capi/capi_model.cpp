// Model lifetime, facts and mode.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>

#include "capi/capi_internal.h"
#include "core/models/registry.h"
#include "core/runtime/modes.h"

using cn::Status;
using cn::capi::guarded;
using cn::capi::require;

namespace {

cn::ModelOptions to_options(const cn_model_params& p) {
    cn::ModelOptions o;
    if (p.struct_size < offsetof(cn_model_params, offload)) {
        cn::fail(Status::kInvalidArgument,
                 "params: struct_size " + std::to_string(p.struct_size) + " is too small; initialise with cn_model_params_init");
    }
    switch (p.device_type) {
        case CN_DEVICE_CPU: o.device = c10::Device(c10::kCPU); break;
        case CN_DEVICE_CUDA: {
            if (p.device_index < 0) cn::fail(Status::kInvalidArgument, "params.device_index: must be >= 0");
            const int32_t n = cn_cuda_device_count();
            if (n == 0) cn::fail(Status::kUnsupported, "params.device_type: CUDA requested but no CUDA device is available");
            if (p.device_index >= n) {
                cn::fail(Status::kInvalidArgument, "params.device_index: " + std::to_string(p.device_index) + " but only " +
                                                       std::to_string(n) + " CUDA device(s) are visible");
            }
            o.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(p.device_index));
            break;
        }
        default: cn::fail(Status::kInvalidArgument, "params.device_type: unknown value " + std::to_string(p.device_type));
    }
    switch (p.dtype) {
        case CN_DTYPE_F32: o.dtype = c10::kFloat; break;
        case CN_DTYPE_BF16: o.dtype = c10::kBFloat16; break;
        case CN_DTYPE_F16: o.dtype = c10::kHalf; break;
        default: cn::fail(Status::kInvalidArgument, "params.dtype: unknown value " + std::to_string(p.dtype));
    }
    if (!cn::find_mode(p.mode)) {
        cn::fail(Status::kInvalidArgument, "params.mode: unknown value " + std::to_string(p.mode) + " (" + cn::mode_names() + ")");
    }
    o.mode = static_cast<cn_mode>(p.mode);
    if (p.n_threads < 0) cn::fail(Status::kInvalidArgument, "params.n_threads: must be >= 0");
    o.check_tensors = p.check_tensors != 0;
    o.mmap_weights = p.mmap_weights != 0;
    const int32_t offload = p.struct_size >= offsetof(cn_model_params, offload) + sizeof(int32_t) ? p.offload : 0;
    if (offload & ~CN_OFFLOAD_TEXT_ENCODER) cn::fail(Status::kInvalidArgument, "params.offload: unknown flags " + std::to_string(offload));
    o.offload_text_encoder = (offload & CN_OFFLOAD_TEXT_ENCODER) != 0;
    return o;
}

}  // namespace

extern "C" {

void cn_model_params_init(cn_model_params* params) {
    if (!params) return;
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
    params->device_type = CN_DEVICE_CPU;
    params->dtype = CN_DTYPE_F32;
    params->mode = CN_MODE_EAGER;
}

cn_status cn_model_create(const char* model_dir, const cn_model_params* params, cn_model** out, cn_error* err) {
    if (out) *out = nullptr;
    return guarded(err, [&] {
        require(out, "out");
        require(model_dir, "model_dir");
        if (*model_dir == '\0') cn::fail(Status::kInvalidArgument, "model_dir is empty");
        cn_model_params defaults;
        cn_model_params_init(&defaults);
        const cn::ModelOptions options = to_options(params ? *params : defaults);
        if (params && params->n_threads > 0) at::set_num_threads(params->n_threads);
        c10::InferenceMode inference;
        c10::OptionalDeviceGuard device_guard(options.device);
        auto model = std::make_unique<cn_model>();
        model->impl = cn::load_model(model_dir, options);
        if (options.mode != CN_MODE_EAGER) model->impl->set_mode(options.mode);
        *out = model.release();
    });
}

void cn_model_free(cn_model* model) {
    try {
        delete model;
    } catch (...) {
        // Destructors of LibTorch tensors do not throw; this barrier only keeps the promise of the ABI.
    }
}

void cn_model_info_init(cn_model_info* info) {
    if (!info) return;
    std::memset(info, 0, sizeof(*info));
    info->struct_size = sizeof(*info);
}

cn_status cn_model_get_info(const cn_model* model, cn_model_info* info, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(info, "info");
        // ABI 0.2's struct ended at max_tokens; fields appended since are filled when the caller's struct has them.
        constexpr uint64_t kMinSize = offsetof(cn_model_info, max_tokens) + sizeof(int64_t);
        if (info->struct_size < kMinSize) {
            cn::fail(Status::kInvalidArgument, "info: struct_size too small; initialise with cn_model_info_init");
        }
        const uint64_t size = std::min<uint64_t>(info->struct_size, sizeof(cn_model_info));
        cn_model_info full;
        cn_model_info_init(&full);
        model->impl->fill_info(full);
        const uint64_t caller_size = info->struct_size;
        std::memcpy(info, &full, size);
        info->struct_size = caller_size;
    });
}

cn_status cn_model_describe(const cn_model* model, char* buf, size_t capacity, size_t* size_out, cn_error* err) {
    if (buf && capacity > 0) buf[0] = '\0';
    return guarded(err, [&] {
        require(model, "model");
        require(size_out, "size_out");
        if (!buf && capacity > 0) cn::fail(Status::kInvalidArgument, "buf is NULL but capacity is not 0");
        const std::string text = model->impl->describe().dump();
        *size_out = text.size() + 1;
        if (!buf) return;
        const size_t n = std::min(capacity - 1, text.size());
        std::memcpy(buf, text.data(), n);
        buf[n] = '\0';
        if (n < text.size()) {
            cn::fail(Status::kInvalidArgument, "buf: capacity " + std::to_string(capacity) + " is less than the " +
                                                   std::to_string(text.size() + 1) + " bytes needed");
        }
    });
}

cn_status cn_model_get_quantiles(const cn_model* model, float* buf, size_t capacity, size_t* count_out, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(count_out, "count_out");
        if (!buf && capacity > 0) cn::fail(Status::kInvalidArgument, "buf is NULL but capacity is not 0");
        const std::vector<float> q = model->impl->quantiles();
        *count_out = q.size();
        if (!buf) return;
        if (capacity < q.size()) {
            cn::fail(Status::kInvalidArgument,
                     "buf: capacity " + std::to_string(capacity) + " is less than the " + std::to_string(q.size()) + " quantile levels");
        }
        std::copy(q.begin(), q.end(), buf);
    });
}

cn_status cn_model_set_mode(cn_model* model, cn_mode mode, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        c10::InferenceMode inference;
        c10::OptionalDeviceGuard device_guard(model->impl->options().device);
        model->impl->set_mode(mode);
    });
}

cn_status cn_model_get_mode(const cn_model* model, cn_mode* out, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(out, "out");
        *out = model->impl->mode();
    });
}

}  // extern "C"
