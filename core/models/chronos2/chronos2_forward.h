// The Chronos-2 network (Chronos2Model.forward of chronos-forecasting 2.3.x), op for op in ATen so that
// fp32 CPU results match the reference to rounding. Inputs and outputs are fp32 on the model's device.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "core/models/chronos2/chronos2_config.h"

namespace cn::chronos2 {

struct ResidualBlockWeights {
    at::Tensor hidden_w, hidden_b, output_w, output_b, residual_w, residual_b;
};

struct LayerWeights {
    at::Tensor time_norm, time_q, time_k, time_v, time_o;
    at::Tensor group_norm, group_q, group_k, group_v, group_o;
    at::Tensor ff_norm, ff_wi, ff_wo;
    // q, k and v weights concatenated [3 I, D]; time_q/k/v (group_q/k/v) are row slices of it, so the
    // eager pass reads the same memory and the fused pass makes one GEMM of the three projections.
    at::Tensor time_qkv, group_qkv;
    // group_o · group_v [D, D], the fp64 product rounded once to the model dtype: fused mode's group attention when
    // every group is a single row (each token then attends to itself alone, so the attention is o(v(x))).
    at::Tensor group_vo;
};

struct Chronos2Weights {
    at::Tensor shared;  // [2, D]; row 1 is the REG token
    ResidualBlockWeights input_embed, output_embed;
    std::vector<LayerWeights> layers;
    at::Tensor final_norm;
    at::Tensor inv_freq;  // RoPE inverse frequencies [d_kv/2], fp32 on the device (not in the checkpoint)
};

// The most negative finite value of a model dtype: the additive attention mask's "masked".
double lowest(c10::ScalarType dt);

// One forward pass.
//   context           [B, L] fp32, NaN = missing (rows left-padded with NaN to a common length)
//   group_ids         [B] int64: rows with equal ids attend to each other
//   future_covariates [B, num_output_patches * patch] fp32, NaN = unknown; undefined = none
// Returns quantile predictions [B, Q, num_output_patches * patch], fp32, un-normalised.
// `singleton_groups` (every id distinct) skips the group attention's scores, which is exact: each
// unmasked query then attends to itself alone.
at::Tensor forward(const Chronos2Config& cfg, const Chronos2Weights& w, c10::ScalarType dtype, const at::Tensor& context,
                   const at::Tensor& group_ids, const at::Tensor& future_covariates, int64_t num_output_patches, bool singleton_groups);

// The same pass on cutenative's kernels (fused mode, chronos2_fused.cpp): same contract, results equal to
// forward() up to rounding, still batch-invariant.
at::Tensor forward_fused(const Chronos2Config& cfg, const Chronos2Weights& w, c10::ScalarType dtype, const at::Tensor& context,
                         const at::Tensor& group_ids, const at::Tensor& future_covariates, int64_t num_output_patches,
                         bool singleton_groups);

// Group self-attention of q, k, v [S, H, B, dk] under the additive mask [S, 1, B, B] (rows of different groups
// masked): SDPA, batch-invariant. On CPU each group attends in a call of its own size (a whole-batch SDPA lets
// the masked rows of other tasks change the GEMM shapes inside it, hence the rounding); on CUDA the whole batch
// at once (its kernels compute each query alone, and graph mode needs a layout-free pass).
at::Tensor group_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                           const at::Tensor& group_ids);

using ForwardFn = at::Tensor (*)(const Chronos2Config&, const Chronos2Weights&, c10::ScalarType, const at::Tensor&, const at::Tensor&,
                                 const at::Tensor&, int64_t, bool);

}  // namespace cn::chronos2
