// The Kronos networks' weights: the tokenizer's and the predictor's tensors, their one declared list each
// (name, shape, flags, destination; core/runtime/weights.h) and what loading derives from them (the rotary
// tables' formula when a checkpoint has no buffer, the fused GEMM weights of CUDA models).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/layers/linear.h"
#include "core/models/kronos/kronos_config.h"
#include "core/runtime/model.h"

namespace cn::kronos {

struct Block {  // TransformerBlock: pre-norm, RoPE self-attention (causal), SwiGLU feed-forward
    at::Tensor norm1, norm2;
    layers::Linear q, k, v, o;
    layers::Linear w1, w2, w3;  // FeedForward: w2(silu(w1 x) * w3 x), no biases
    // The same weights fused for one GEMM each (q, k, v and w1, w3 are then row slices of these); set at load
    // for CUDA devices only (the kernels path and the graph step use them), undefined otherwise.
    layers::Linear qkv, w13;
    at::Tensor inv_freq;  // rotary inverse frequencies [head_dim / 2], fp32
    int64_t heads = 0;
};

struct TokenizerWeights {
    layers::Linear embed, head, quant_embed, post_quant_embed;
    std::vector<Block> encoder, decoder;
};

struct PredictorWeights {
    at::Tensor emb_s1, emb_s2;
    layers::Linear fusion;
    at::Tensor minute, hour, weekday, day, month;
    std::vector<Block> blocks;
    at::Tensor norm;
    layers::Linear dep_q, dep_k, dep_v, dep_o;
    layers::Linear dep_kv;  // dep_k and dep_v fused (row slices of it); CUDA devices only, like Block::qkv
    at::Tensor dep_norm, dep_inv_freq;
    int64_t dep_heads = 4;
    layers::Linear proj_s1, proj_s2;
};

struct KronosWeights {
    TokenizerWeights tok;
    PredictorWeights pred;
    uint64_t n_parameters = 0;  // both networks' parameters (the rotary buffers are not counted)
};

// Declares, validates and loads both checkpoints of a Kronos model directory (<dir>/tokenizer and <dir>); throws
// cn::Error(kModelFormat) naming the tensor.
KronosWeights load_weights(const std::string& dir, const KronosConfig& cfg, const ModelOptions& options);

}  // namespace cn::kronos
