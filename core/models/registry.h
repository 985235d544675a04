// The model registry: every architecture cutenative can load, in one table (core/models/registry.cpp), each
// entry saying how to recognise its directory and how to load it. `load_model` walks the table; the runtime
// (core/runtime) includes no model. Adding an architecture = one entry here (docs/architecture.md, "Adding an
// architecture").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "capi/include/cutenative.h"
#include "core/format/model_config.h"
#include "core/runtime/model.h"

namespace cn::models {

struct Architecture {
    const char* name;  // stable lower-case name, as in docs and messages ("chronos2")
    // Whether `config` (the directory's config.json) is this architecture's.
    bool (*recognise)(const format::ModelConfig& config);
    // Loads the directory; called only when recognise() said yes. Throws cn::Error.
    std::unique_ptr<Model> (*load)(const std::string& dir, const format::ModelConfig& config, const ModelOptions& options);
    // Optional: for a directory this architecture does not load but which looks like one of its parts (a Kronos
    // tokenizer alone, a non-BERT sentence-transformers model), the message to refuse it with; empty otherwise.
    std::string (*near_miss)(const std::string& dir, const format::ModelConfig& config) = nullptr;
};

// The registered architectures, in the order they are tried.
const std::vector<Architecture>& architectures();

}  // namespace cn::models

namespace cn {

// Reads <dir>/config.json (or model_index.json for diffusion pipelines), decides the architecture from the
// registry and loads it. Throws cn::Error: kNotFound, kModelFormat, kUnsupported (unknown architecture, or one
// this build does not implement yet; the message says which), kOutOfDeviceMemory.
std::unique_ptr<Model> load_model(const std::string& dir, const ModelOptions& options);

}  // namespace cn
