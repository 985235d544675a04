// Rotary position embeddings.
//  - Rotate-half convention (GPT-NeoX / Llama / T5-style RoPE as Chronos-2, Kronos and Qwen3 apply it): tables
//    built in fp32 from fp32 inverse frequencies, then rounded to the activations' dtype.
//  - Complex, interleaved-pair convention over several position axes (Z-Image's DiT, diffusers' RopeEmbedder):
//    per-axis complex64 tables from fp64 frequencies, applied in fp32 and rounded once.
#pragma once

#include <vector>

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

// Complex multi-axis RoPE (diffusers' RopeEmbedder). For each axis a with size d_a and length n_a: frequencies
// 1 / theta^(arange(0, d_a, 2) / d_a) in fp64, angles outer(arange(n_a), freqs) in fp64 rounded to fp32, then
// polar(1, angle) as complex64: one [n_a, d_a / 2] table per axis, built on the CPU and moved to `device`.
std::vector<at::Tensor> complex_rope_tables(const std::vector<int64_t>& axes_dims, const std::vector<int64_t>& axes_lens, double theta,
                                            c10::Device device);

// The per-token complex factors [N, sum(d_a) / 2] of position ids `ids` [N, n_axes] (int): each axis' table row at
// its id, concatenated in axis order.
at::Tensor complex_rope_gather(const std::vector<at::Tensor>& tables, const at::Tensor& ids);

// x [B, S, H, hd] (any float dtype) times `freqs` [B, S, hd / 2] (complex64), viewing consecutive pairs
// (x[2j], x[2j+1]) as complex numbers: computed in fp32, rounded once to x's dtype (apply_rotary_emb of
// diffusers' Z-Image attention processor).
at::Tensor apply_complex_rope(const at::Tensor& x, const at::Tensor& freqs);

}  // namespace cn::layers
