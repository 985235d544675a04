// The execution modes, written once: the table that names, parses and validates them (cn_mode_name,
// cn_mode_from_name, cn_model_create's params check, cn_model_set_mode). What each mode means per architecture
// is in docs/architecture.md ("Execution modes"); each model turns the mode into its own options when it is set
// (Model::apply_mode), never during a call. LibTorch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "capi/include/cutenative.h"

namespace cn {

struct ModeInfo {
    cn_mode mode;
    const char* name;     // stable lower-case name ("eager")
    const char* summary;  // one line, architecture-independent
};

// Every mode, in enum order.
const std::vector<ModeInfo>& modes();

// The entry of a valid enum value, or null (values outside the enum, e.g. from a C caller).
const ModeInfo* find_mode(int64_t value);

// The mode named `name`, or null.
const ModeInfo* find_mode(const char* name);

// "eager, graph or fused": the valid names, for messages.
const char* mode_names();

}  // namespace cn
