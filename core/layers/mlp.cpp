#include "core/layers/mlp.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/silu.h>

namespace cn::layers {

at::Tensor relu_mlp(const at::Tensor& x, const Linear& in, const Linear& out, LinearOp op) { return op(at::relu(op(x, in)), out); }

at::Tensor gelu_mlp(const at::Tensor& x, const Linear& up, const Linear& down, LinearOp op) { return op(at::gelu(op(x, up)), down); }

at::Tensor swiglu_mlp(const at::Tensor& x, const Linear& gate, const Linear& up, const Linear& down, LinearOp op) {
    return op(at::silu(op(x, gate)) * op(x, up), down);
}

}  // namespace cn::layers
