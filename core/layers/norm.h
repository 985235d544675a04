// Normalisation layers, each reproducing one reference's rounding (the order and precision of its ops).
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::layers {

// T5LayerNorm (transformers' T5, Chronos-2): the variance mean(x^2) in fp32, x * rsqrt(var + eps) (promoted to
// fp32), rounded to the weight's dtype when that is bf16/fp16, then times the weight.
at::Tensor t5_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// RMSNorm in the activations' dtype (Kronos' module.py): x * rsqrt(mean(x * x) + eps) * weight, every op in x's
// dtype (fp32: the reference exactly; bf16 rounds each op as a bf16 copy of the reference would).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// nn.LayerNorm over the last dim (BERT): at::layer_norm, weight and bias.
struct Norm {
    at::Tensor w, b;
};
at::Tensor layer_norm(const at::Tensor& x, const Norm& n, double eps);

}  // namespace cn::layers
