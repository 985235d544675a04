// Toto (Datadog Toto-Open-Base-1.0; toto-ts 0.2.0) configuration: the keyword arguments of the reference's
// Toto(...) constructor as its config.json stores them. Keys the file omits take the constructor's defaults
// (spacewise_first true, output_distribution_kwargs {}, stabilize_with_global true, scale_factor_exponent 10);
// use_memory_efficient_attention is read and ignored (it selects xformers kernels, the same math); dropout is
// unused at inference. LibTorch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "core/format/model_config.h"

namespace cn::toto {

struct TotoConfig {
    int64_t patch_size = 64, stride = 64;
    int64_t embed_dim = 768, num_layers = 12, num_heads = 12, mlp_hidden_dim = 3072;
    int64_t spacewise_every_n_layers = 12;
    bool spacewise_first = true;
    int64_t k_components = 24;  // output_distribution_kwargs.k_components (MixtureOfStudentTsOutput)
    bool stabilize_with_global = true;
    double scale_factor_exponent = 10.0;
    std::vector<bool> spacewise;  // per layer: space-wise attention (Transformer._get_layer_types)

    int64_t head_dim() const { return embed_dim / num_heads; }
    int64_t time_layers() const;  // layers with time-wise attention (the ones a KV cache holds)
};

// True for a Toto config.json: the constructor's keys (scaler_cls, output_distribution_classes, patch_size).
bool is_toto(const format::ModelConfig& cfg);

// Parses and checks the config; kModelFormat naming the field, kUnsupported for valid reference setups this build
// does not run (another scaler or output distribution, stride != patch_size).
TotoConfig parse_toto_config(const format::ModelConfig& cfg);

}  // namespace cn::toto
