// Stable lower-case names of the ABI's enums ("cpu", "bf16", "chronos2", "graph"); the C functions
// cn_*_name return these. LibTorch-free.
#pragma once

#include "capi/include/cutenative.h"

namespace cn {

const char* status_name(cn_status v);
const char* device_type_name(cn_device_type v);
const char* dtype_name(cn_dtype v);
const char* model_kind_name(cn_model_kind v);
const char* mode_name(cn_mode v);

}  // namespace cn
