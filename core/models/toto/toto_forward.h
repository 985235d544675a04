// Toto's backbone in eval mode, op for op with toto-ts 0.2.0 (fp32 on the CPU: the same ATen ops on tensors of the
// same shapes and strides, so the same bits): the causal patch scaler (float64), the patch embedding, the
// time-wise (RoPE + xPos, causal, KV-cached) and space-wise layers, the unembedding and the Student-t mixture's
// parameters; then one draw from the mixture in the reference's RNG order, or its mean. The decoding loop around
// it is toto_pipeline.h.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "core/models/toto/toto_config.h"
#include "core/models/toto/toto_weights.h"

namespace cn::toto {

// The rotary tables of TimeAwareRotaryEmbedding(head_dim, use_xpos=True): inverse frequencies and the xPos base
// per rotary pair, fp32, computed with the reference's ops.
struct Rotary {
    at::Tensor freqs;  // [head_dim / 2]
    at::Tensor xpos;   // [head_dim / 2]
};
Rotary make_rotary(int64_t head_dim, c10::Device device);

// The time-wise layers' keys and values, [time layers, rows, heads, max patches, head_dim] each (the reference's
// KVCache without xformers), and each layer's length.
class KvCache {
public:
    KvCache(const TotoConfig& cfg, int64_t rows, int64_t max_patches, c10::Device device, c10::ScalarType dtype);
    int64_t length(int64_t time_layer) const { return len_[static_cast<size_t>(time_layer)]; }
    // Appends k, v [rows, heads, n, head_dim] and returns the layer's keys and values so far.
    std::pair<at::Tensor, at::Tensor> append(int64_t time_layer, const at::Tensor& k, const at::Tensor& v);
    void reset();
    int64_t max_patches() const { return max_; }
    int64_t rows() const { return keys_.size(1); }
    c10::ScalarType dtype() const { return keys_.scalar_type(); }
    c10::Device device() const { return keys_.device(); }
    // Fills this cache (rows = copies x src's rows) with `copies` repetitions of src's contents, repetition-major
    // (row r holds src's row r mod src's rows): the reference's "(s b)" sample copies of one prefill.
    void fill_repeated(const KvCache& src, int64_t copies);
    // Copies src's contents and lengths (the same shape).
    void copy_from(const KvCache& src);

private:
    at::Tensor keys_, values_;
    std::vector<int64_t> len_;
    int64_t max_ = 0;
};

// The mixture the backbone predicts for every step it processed ([rows, V, T, K]; the Categorical's renormalised
// probabilities), with the scaler's per-step patch statistics over the whole current series ([rows, V, L]).
struct Mixture {
    at::Tensor df, loc, scale, probs;
    at::Tensor patch_loc, patch_scale;
};

// Intermediate values of one model call (the call-th of the forecast's first batch, 0 the prefill), for parity
// tests (nullptr in production).
struct Trace {
    int64_t call = 0;
    at::Tensor loc, scale, scaled, embed;
    std::vector<at::Tensor> layers;
    at::Tensor df, loc_k, scale_k, probs;  // the mixture's parameters (probs renormalised)
};

// One model call (TotoBackbone.forward): inputs [rows, V, L] (L a multiple of the patch size), padding_mask [rows,
// V, L] bool, the scaler's global statistics over the first prefix_length steps; with a cache, only the patches it
// does not hold yet go through the transformer (all at the first call, one after).
// `fused`: fused mode's attention for a decode step's single query and for space-wise layers (small_attention:
// three ATen ops instead of a fused SDPA kernel with a 64-row tile per (batch, head); equal up to rounding).
// Inputs are fp32 whatever the model's dtype; the mixture comes back in fp32.
Mixture forward(const TotoConfig& cfg, const TotoWeights& w, const Rotary& rot, const at::Tensor& inputs, const at::Tensor& padding_mask,
                int64_t prefix_length, KvCache* cache, Trace* trace = nullptr, bool fused = false);

// The mixture of `copies` repetitions of m's rows, repetition-major ("(s b)"), materialised.
Mixture repeat_rows(const Mixture& m, int64_t copies);

// distr.sample() of the forecaster's AffineTransformed mixture: component indices (multinomial), normals, gammas,
// in that order from `gen`; [rows, V, T] in the series' units.
at::Tensor sample(const Mixture& m, at::Generator& gen);
// distr.mean: the mixture's mean in the series' units, [rows, V, T].
at::Tensor mean(const Mixture& m);
// replace_extreme_values: NaN, +-Inf and |x| >= FLT_MAX / 2 become 0.
at::Tensor replace_extreme(const at::Tensor& t);

}  // namespace cn::toto
