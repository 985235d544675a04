// The Toto weight list: every tensor of the reference's state dict declared once (names as Toto.state_dict() gives
// them, "model." + the backbone's), validated against model.safetensors and loaded. The xformers-era names of the
// SwiGLU projections (mlp.0.w12 / mlp.0.w3, which load_from_checkpoint remaps to mlp.0 / mlp.2) are accepted as
// well, and the rotary tables the reference recomputes (*.rotary_emb.freqs) are ignored; any other missing,
// unknown or mis-shaped tensor is kModelFormat naming the file and key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/layers/linear.h"
#include "core/models/toto/toto_config.h"
#include "core/runtime/model.h"
#include "core/runtime/weight_index.h"

namespace cn::toto {

struct Layer {
    at::Tensor norm1, norm2;  // RMSNorm scales
    layers::Linear qkv, out;  // attention.wQKV, attention.wO
    layers::Linear up, down;  // mlp.0 (gate | value), mlp.2
    bool spacewise = false;
};

struct TotoWeights {
    layers::Linear patch_embed;  // patch_embed.projection [D, P]
    std::vector<Layer> layers;
    layers::Linear unembed;                          // [D * P, D]
    layers::Linear df, loc, scale, mixture_weights;  // output_distribution heads [K, D]
    uint64_t n_parameters = 0;
    WeightIndex index;  // every loaded tensor by its checkpoint name
};

TotoWeights load_weights(const std::string& dir, const TotoConfig& cfg, const ModelOptions& options);

}  // namespace cn::toto
