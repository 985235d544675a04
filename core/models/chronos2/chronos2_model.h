// Chronos-2 (amazon/chronos-2 and its small/synth variants): weights, forward pass and pipeline.
#pragma once

#include <memory>
#include <string>

#include "core/format/model_config.h"
#include "core/runtime/model.h"

namespace cn::chronos2 {

std::unique_ptr<Model> load_chronos2(const std::string& dir, const format::ModelConfig& config,
                                     const ModelOptions& options);

}  // namespace cn::chronos2
