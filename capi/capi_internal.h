// Internal to the C ABI glue: the structs behind the opaque handles and the exception barrier every
// entry point goes through. Not installed.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

#include <memory>
#include <new>
#include <string>
#include <utility>

#include <c10/util/Exception.h>
#ifdef CN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "capi/include/cutenative.h"
#include "core/common/status.h"
#include "core/runtime/model.h"
#include "core/runtime/requests.h"
#include "core/runtime/run_context.h"

struct cn_error {
    cn_status status = CN_STATUS_OK;
    std::string message;
};

struct cn_model {
    std::unique_ptr<cn::Model> impl;
};

struct cn_run_options {
    cn::RunContext ctx;
};

struct cn_forecast_request {
    cn::ForecastRequest r;
};

struct cn_generate_request {
    cn::GenerateRequest r;
};

namespace cn::capi {

// Copies `full` into a caller's output struct only as far as the caller's struct_size reaches: a caller built
// against an older header (its struct ends sooner) gets the fields it knows. `min_size` is the struct's size in
// the ABI that introduced it; smaller is INVALID_ARGUMENT naming `what` and its init function.
template <class T>
void write_prefix(T* out, T full, uint64_t min_size, const char* what, const char* init) {
    if (out->struct_size < min_size) {
        cn::fail(cn::Status::kInvalidArgument, std::string(what) + ": struct_size too small; initialise with " + init);
    }
    const uint64_t caller_size = out->struct_size;
    std::memcpy(static_cast<void*>(out), &full, static_cast<size_t>(std::min<uint64_t>(caller_size, sizeof(T))));
    out->struct_size = caller_size;
}

// Stores status + message in err (if any). Never throws: a failure to copy the message leaves it empty.
inline cn_status set_error(cn_error* err, cn_status status, const char* message) noexcept {
    if (err) {
        err->status = status;
        try {
            err->message = message ? message : "";
        } catch (...) {
            err->message.clear();
        }
    }
    return status;
}

// Runs f() and converts every exception into a status; clears err on success. The only way the ABI calls
// into the core.
template <class F>
cn_status guarded(cn_error* err, F&& f) noexcept {
    try {
        f();
        if (err) {
            err->status = CN_STATUS_OK;
            err->message.clear();
        }
        return CN_STATUS_OK;
    } catch (const cn::Error& e) {
        return set_error(err, static_cast<cn_status>(e.status()), e.what());
    } catch (const c10::OutOfMemoryError& e) {
        // Give the cached blocks of the failed call back, so the model stays usable for smaller work.
#ifdef CN_WITH_CUDA
        try {
            c10::cuda::CUDACachingAllocator::emptyCache();
        } catch (...) {}
#endif
        return set_error(err, CN_STATUS_OUT_OF_DEVICE_MEMORY, e.what_without_backtrace());
    } catch (const c10::Error& e) {
        return set_error(err, CN_STATUS_INTERNAL, e.what_without_backtrace());
    } catch (const std::bad_alloc&) {
        return set_error(err, CN_STATUS_OUT_OF_HOST_MEMORY, "out of host memory");
    } catch (const std::exception& e) {
        return set_error(err, CN_STATUS_INTERNAL, e.what());
    } catch (...) {
        return set_error(err, CN_STATUS_INTERNAL, "unknown internal error");
    }
}

// Throws kInvalidArgument "<what> is NULL" when p is NULL.
template <class T>
void require(const T* p, const char* what) {
    if (p == nullptr) cn::fail(cn::Status::kInvalidArgument, std::string(what) + " is NULL");
}

}  // namespace cn::capi
