// Feed-forward blocks. Each takes the linear op to use (layers::linear, or an architecture's own GEMM such as
// Chronos-2's per-series one) and applies the activation as the reference does, in the activations' dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include "core/layers/linear.h"

namespace cn::layers {

// out(relu(in(x))): T5's DenseReluDense (Chronos-2).
at::Tensor relu_mlp(const at::Tensor& x, const Linear& in, const Linear& out, LinearOp op = linear);

// down(gelu(up(x))) with the exact (erf) GELU: BERT's intermediate + output dense.
at::Tensor gelu_mlp(const at::Tensor& x, const Linear& up, const Linear& down, LinearOp op = linear);

// down(silu(gate(x)) * up(x)): SwiGLU (Kronos' FeedForward w2(silu(w1 x) * w3 x), Llama/Qwen MLPs).
at::Tensor swiglu_mlp(const at::Tensor& x, const Linear& gate, const Linear& up, const Linear& down, LinearOp op = linear);

}  // namespace cn::layers
