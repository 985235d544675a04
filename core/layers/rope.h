// Rotary position embeddings, rotate-half convention (GPT-NeoX / Llama / T5-style RoPE as Chronos-2 and Kronos
// apply it): tables built in fp32 from fp32 inverse frequencies, then rounded to the activations' dtype.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace cn::layers {

// 1 / theta^(arange(0, dim, 2).float() / dim), computed on the CPU in fp32 as the references do at init, then
// moved to `device`.
at::Tensor rope_inv_freq(int64_t dim, double theta, c10::Device device);

// cos and sin [len, dim] of positions pos0 .. pos0 + len - 1: freqs = outer(positions (fp32), inv_freq),
// emb = cat(freqs, freqs), cos/sin in fp32 rounded to `dtype`. Device-side only (capturable in a CUDA graph).
struct RopeTables {
    at::Tensor cos, sin;
};
RopeTables rope_tables(const at::Tensor& inv_freq, int64_t pos0, int64_t len, c10::ScalarType dtype);

// cat(-x[..., d/2:], x[..., :d/2])
at::Tensor rotate_half(const at::Tensor& x);

// x * cos + rotate_half(x) * sin, for x [..., len, dim] and tables [len, dim] in x's dtype.
at::Tensor apply_rope(const at::Tensor& x, const RopeTables& t);

}  // namespace cn::layers
