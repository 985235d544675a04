// Z-Image's text encoder: transformers' Qwen3Model run the way ZImagePipeline uses it, i.e. up to
// hidden_states[-2] = the raw output of the second-to-last decoder layer (the last layer and the final norm are
// never run), on the valid tokens only (right padding plus the causal mask means they never see the pads).
// Weights: "[model.]embed_tokens.weight", "[model.]layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
// self_attn.{q,k}_norm, post_attention_layernorm, mlp.{gate,up,down}_proj}" ("model." prefix optional, as
// Qwen3ForCausalLM saves it); norm.weight, the last layer and lm_head are accepted and not loaded.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/models/zimage/zimage_config.h"

namespace cn {
class Weights;
}

namespace cn::zimage {

class Qwen3Encoder {
public:
    // Declares the weights into `w` (before w.validate()/load_all()); `prefix` is "" or "model.".
    Qwen3Encoder(const TextEncoderConfig& c, Weights& w, const std::string& prefix);
    // Finishes after load_all (RoPE inverse frequencies on `device`).
    void finish(c10::Device device);

    // [L, hidden] in the weights' dtype: hidden_states[-2] of the L token ids (positions 0..L-1, causal).
    at::Tensor encode(const std::vector<int32_t>& ids) const;

private:
    struct Layer;
    TextEncoderConfig c_;
    at::Tensor embed_;
    std::vector<std::shared_ptr<Layer>> layers_;  // the first layers - 1 decoder layers
    at::Tensor inv_freq_;
};

}  // namespace cn::zimage
