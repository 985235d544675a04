#include "core/layers/attention.h"

#include <ATen/ops/scaled_dot_product_attention.h>

namespace cn::layers {

at::Tensor split_heads(const at::Tensor& x, int64_t heads) {
    return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

at::Tensor merge_heads(const at::Tensor& a) {
    const at::Tensor t = a.transpose(1, 2);
    return t.reshape({t.size(0), t.size(1), t.size(2) * t.size(3)});
}

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask, bool causal,
                     std::optional<double> scale) {
    // An undefined mask is passed as no mask (nullopt): SDPA rejects an optional holding an undefined tensor.
    const std::optional<at::Tensor> m = mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt;
    return at::scaled_dot_product_attention(q, k, v, m, 0.0, causal, scale);
}

}  // namespace cn::layers
