#include "core/layers/norm.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rsqrt.h>

namespace cn::layers {

at::Tensor t5_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
    const at::Tensor var = at::pow(x.to(at::kFloat), 2).mean(-1, /*keepdim=*/true);
    at::Tensor y = x * at::rsqrt(var + eps);
    if (weight.scalar_type() == at::kHalf || weight.scalar_type() == at::kBFloat16) y = y.to(weight.scalar_type());
    return weight * y;
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
    return x * at::rsqrt((x * x).mean(-1, /*keepdim=*/true) + eps) * weight;
}

at::Tensor layer_norm(const at::Tensor& x, const Norm& n, double eps) { return at::layer_norm(x, {x.size(-1)}, n.w, n.b, eps); }

}  // namespace cn::layers
