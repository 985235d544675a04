// Multi-head attention building blocks: head split/merge and scaled-dot-product attention (ATen's SDPA, so the
// backend choice and rounding are PyTorch's for the same device, dtype and mask).
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

namespace cn::layers {

// "b l (h d) -> b h l d" (a view of x [B, L, H * hd]).
at::Tensor split_heads(const at::Tensor& x, int64_t heads);

// "b h l d -> b l (h d)" (a copy when a is not laid out that way).
at::Tensor merge_heads(const at::Tensor& a);

// softmax(q k^T * scale + mask) v, scale defaulting to 1/sqrt(hd); `mask` additive or boolean, undefined for
// none; `causal` as F.scaled_dot_product_attention's is_causal.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask = {}, bool causal = false,
                     std::optional<double> scale = std::nullopt);

}  // namespace cn::layers
