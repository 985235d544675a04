// Versions, errors and enum names: the parts of the ABI that touch no model.
#include <cstring>

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

#include "capi/capi_internal.h"
#include "core/runtime/cpu_numerics.h"
#include "core/runtime/modes.h"
#include "core/runtime/names.h"

#ifndef CN_VERSION_STRING
#error "CN_VERSION_STRING must be defined by the build"
#endif

namespace {
// MKL accepts its reproducibility mode only before its first computation: apply it when the library loads.
__attribute__((constructor)) void cn_on_load() { (void)cn::runtime::cpu_numerics(); }
}  // namespace

extern "C" {

void cn_abi_version(uint32_t* major, uint32_t* minor) {
    if (major) *major = CN_ABI_VERSION_MAJOR;
    if (minor) *minor = CN_ABI_VERSION_MINOR;
}

const char* cn_version(void) { return CN_VERSION_STRING; }

const char* cn_build_info(void) {
    return "cutenative " CN_VERSION_STRING " (torch " TORCH_VERSION
#ifdef CN_WITH_CUDA
           ", CUDA kernels on"
#else
           ", CUDA kernels off"
#endif
           ", " __VERSION__ ")";
}

uint32_t cn_cpu_numerics(const char** description) {
    const cn::runtime::CpuNumerics& n = cn::runtime::cpu_numerics();
    if (description) *description = n.description.c_str();
    return (n.batch_invariant ? CN_CPU_BATCH_INVARIANT : 0u) | (n.thread_invariant ? CN_CPU_THREAD_INVARIANT : 0u);
}

const char* cn_status_name(cn_status s) { return cn::status_name(s); }

cn_status cn_error_create(cn_error** out) {
    if (!out) return CN_STATUS_INVALID_ARGUMENT;
    *out = new (std::nothrow) cn_error();
    return *out ? CN_STATUS_OK : CN_STATUS_OUT_OF_HOST_MEMORY;
}

void cn_error_free(cn_error* err) { delete err; }

cn_status cn_error_status(const cn_error* err) { return err ? err->status : CN_STATUS_OK; }

const char* cn_error_message(const cn_error* err) { return err ? err->message.c_str() : ""; }

void cn_error_clear(cn_error* err) {
    if (err) {
        err->status = CN_STATUS_OK;
        err->message.clear();
    }
}

const char* cn_device_type_name(cn_device_type v) { return cn::device_type_name(v); }

const char* cn_dtype_name(cn_dtype v) { return cn::dtype_name(v); }

const char* cn_model_kind_name(cn_model_kind v) { return cn::model_kind_name(v); }

const char* cn_mode_name(cn_mode v) { return cn::mode_name(v); }

cn_status cn_dtype_from_name(const char* name, cn_dtype* out) {
    if (!name || !out) return CN_STATUS_INVALID_ARGUMENT;
    for (cn_dtype d : {CN_DTYPE_F32, CN_DTYPE_BF16, CN_DTYPE_F16}) {
        if (std::strcmp(name, cn_dtype_name(d)) == 0) {
            *out = d;
            return CN_STATUS_OK;
        }
    }
    return CN_STATUS_INVALID_ARGUMENT;
}

cn_status cn_mode_from_name(const char* name, cn_mode* out) {
    const cn::ModeInfo* m = cn::find_mode(name);
    if (!m || !out) return CN_STATUS_INVALID_ARGUMENT;
    *out = m->mode;
    return CN_STATUS_OK;
}

int32_t cn_cuda_device_count(void) {
    try {
        const auto& hooks = at::detail::getCUDAHooks();
        return hooks.hasCUDA() ? static_cast<int32_t>(hooks.deviceCount()) : 0;
    } catch (...) {
        return 0;
    }
}

}  // extern "C"
