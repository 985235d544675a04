// Linear layers shared by every architecture: the weight pair, its declaration in a model's weight list, the
// plain GEMM, and row-fusing several projections into one weight.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace cn {
class Weights;
}

namespace cn::layers {

// nn.Linear: y = x W^T + b. `b` is undefined for bias-free layers.
struct Linear {
    at::Tensor w, b;
};

// Signature of a linear op a block can be built with: `linear` below, or an architecture's own GEMM (Chronos-2's
// per-series, batch-invariant one).
using LinearOp = at::Tensor (*)(const at::Tensor& x, const Linear& l);

// at::linear(x, w, b): ATen's GEMM, rounding as torch.nn.functional.linear does on the same device.
at::Tensor linear(const at::Tensor& x, const Linear& l);

// Declares "<prefix>.weight" [out, in] (and "<prefix>.bias" [out] when `bias`) into `dst`.
void declare_linear(Weights& w, Linear& dst, const std::string& prefix, int64_t out, int64_t in, bool bias = true);

// One Linear whose weight (and bias) rows are the parts' in order; each part becomes a row slice of it (same
// values, so the unfused ops are unchanged) and one GEMM can replace several small ones (fused QKV, w1|w3).
Linear fuse_rows(std::initializer_list<Linear*> parts);
Linear fuse_rows(const std::vector<Linear*>& parts);

}  // namespace cn::layers
