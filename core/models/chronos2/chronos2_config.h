// Chronos-2 configuration as read from a Hugging Face config.json (Chronos2CoreConfig + chronos_config).
// Every shape of the model follows from these values; nothing is hard-coded for the base size.
// LibTorch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/format/model_config.h"

namespace cn::chronos2 {

struct Chronos2Config {
    int64_t d_model = 512;
    int64_t d_kv = 64;
    int64_t d_ff = 2048;
    int64_t num_layers = 6;
    int64_t num_heads = 8;
    double layer_norm_epsilon = 1e-6;
    double rope_theta = 10000.0;
    // chronos_config
    int64_t context_length = 0;
    int64_t patch_size = 0;  // input_patch_size == input_patch_stride == output_patch_size
    int64_t max_output_patches = 1;
    double time_encoding_scale = 0;  // defaults to context_length
    bool use_arcsinh = false;
    std::vector<double> quantiles;

    int64_t inner_dim() const { return num_heads * d_kv; }
    int64_t native_horizon() const { return max_output_patches * patch_size; }
};

// True if config.json describes a Chronos-2 model (architectures contains "Chronos2Model").
bool is_chronos2(const format::ModelConfig& cfg);

// Reads and range-checks every field; throws cn::Error(kModelFormat) naming the file and field, or
// kUnsupported for valid configurations the reference forward cannot run (no REG token, gated FF,
// overlapping patches).
Chronos2Config parse_chronos2_config(const format::ModelConfig& cfg);

}  // namespace cn::chronos2
