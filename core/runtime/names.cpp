#include "core/runtime/names.h"

#include "core/runtime/modes.h"

namespace cn {

const char* status_name(cn_status s) {
    switch (s) {
        case CN_STATUS_OK: return "OK";
        case CN_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
        case CN_STATUS_NOT_FOUND: return "NOT_FOUND";
        case CN_STATUS_UNSUPPORTED: return "UNSUPPORTED";
        case CN_STATUS_MODEL_FORMAT: return "MODEL_FORMAT";
        case CN_STATUS_OUT_OF_HOST_MEMORY: return "OUT_OF_HOST_MEMORY";
        case CN_STATUS_OUT_OF_DEVICE_MEMORY: return "OUT_OF_DEVICE_MEMORY";
        case CN_STATUS_CANCELLED: return "CANCELLED";
        case CN_STATUS_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
        case CN_STATUS_BUSY: return "BUSY";
        case CN_STATUS_INTERNAL: return "INTERNAL";
    }
    return "UNKNOWN";
}

const char* device_type_name(cn_device_type v) {
    switch (v) {
        case CN_DEVICE_CPU: return "cpu";
        case CN_DEVICE_CUDA: return "cuda";
    }
    return "unknown";
}

const char* dtype_name(cn_dtype v) {
    switch (v) {
        case CN_DTYPE_F32: return "f32";
        case CN_DTYPE_BF16: return "bf16";
        case CN_DTYPE_F16: return "f16";
    }
    return "unknown";
}

const char* model_kind_name(cn_model_kind v) {
    switch (v) {
        case CN_MODEL_KIND_UNKNOWN: return "unknown";
        case CN_MODEL_KIND_CHRONOS2: return "chronos2";
        case CN_MODEL_KIND_KRONOS: return "kronos";
        case CN_MODEL_KIND_EMBEDDING: return "embedding";
        case CN_MODEL_KIND_ZIMAGE: return "zimage";
        case CN_MODEL_KIND_TOTO: return "toto";
    }
    return "unknown";
}

const char* mode_name(cn_mode v) {
    const ModeInfo* m = find_mode(static_cast<int64_t>(v));
    return m ? m->name : "unknown";
}

}  // namespace cn
