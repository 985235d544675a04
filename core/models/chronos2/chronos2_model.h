// Chronos-2 (amazon/chronos-2 and its small/synth variants): weights, forward pass and pipeline.
#pragma once

#include <memory>
#include <string>

#include "core/format/model_config.h"
#include "core/models/chronos2/chronos2_forward.h"
#include "core/runtime/weights.h"
#include "core/runtime/model.h"

namespace cn::chronos2 {

// Materialises every weight (declared and validated beforehand by load_chronos2's expectations).
Chronos2Weights load_weights(const Chronos2Config& cfg, const Weights& w);

std::unique_ptr<Model> load_chronos2(const std::string& dir, const format::ModelConfig& config,
                                     const ModelOptions& options);

}  // namespace cn::chronos2
