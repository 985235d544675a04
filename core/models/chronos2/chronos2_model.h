// Chronos-2 (amazon/chronos-2 and its small/synth variants): weights, forward pass and pipeline.
#pragma once

#include <memory>
#include <string>

#include "core/format/model_config.h"
#include "core/models/chronos2/chronos2_forward.h"
#include "core/runtime/model.h"
#include "core/runtime/weights.h"

namespace cn::chronos2 {

// The checkpoint's tensors, each named once with its shape: declares them into `out`, which Weights::validate
// and Weights::load_all then check and fill.
void declare_weights(const Chronos2Config& cfg, Weights& w, Chronos2Weights& out);
// After load_all: the fused QKV weights (q, k and v become row slices of them) and the RoPE inverse frequencies,
// which the checkpoint does not hold.
void finish_weights(const Chronos2Config& cfg, c10::Device device, Chronos2Weights& out);

std::unique_ptr<Model> load_chronos2(const std::string& dir, const format::ModelConfig& config, const ModelOptions& options);

}  // namespace cn::chronos2
