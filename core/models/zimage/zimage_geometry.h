// The shape-only part of a Z-Image DiT call, built once per request (not once per step): for a batch of B latents
// of h x w and the captions' padded lengths, the image tokens and their pad rows, the position ids turned into RoPE
// factors (image sequence, unified image + caption sequence) and the key mask of a batch whose unified sequences
// differ in length. Everything here depends on (B, h, w, caption lengths) alone, so a graph entry captured for
// those keeps its own copy. Position ids (diffusers' ZImageTransformer2DModel): caption row i (pads included) is
// (1 + i, 0, 0); image token (y, x) is (Lc + 1, y, x); image pad rows (0, 0, 0).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace cn::zimage {

constexpr int64_t kSeqMultiple = 32;  // SEQ_MULTI_OF: image and caption sequences are padded to multiples of it

// Rows appended to reach a multiple of kSeqMultiple.
inline int64_t pad_len(int64_t n) { return (kSeqMultiple - n % kSeqMultiple) % kSeqMultiple; }

// Position ids [f * h * w, 3] (int32, CPU) of a row-major (f, h, w) grid whose first axis starts at `f0`
// (create_coordinate_grid).
at::Tensor grid_ids(int64_t f, int64_t h, int64_t w, int64_t f0);

// [n_i, ...] items -> [B, max n, ...], zero rows after each item (pad_sequence). Device ops only.
at::Tensor pad_batch(const std::vector<at::Tensor>& items);

// The [B, 1, 1, max n] key mask (true = attend) of items of lengths `lens` on `device`, or an undefined tensor
// when all lengths are equal (diffusers passes no mask then).
at::Tensor key_mask(const std::vector<int64_t>& lens, c10::Device device);

struct DitGeometry {
    int64_t batch = 0, h = 0, w = 0;  // latents [B, C, h, w] (h, w even)
    int64_t tokens = 0, pad = 0;      // image tokens (h / 2) * (w / 2) and the pad rows after them
    std::vector<int64_t> cap_lens;    // each item's padded caption length
    at::Tensor img_pad_rows;          // [B * (tokens + pad), 1] bool on the device: the pad rows; undefined when pad == 0
    at::Tensor img_freqs;             // [B, tokens + pad, hd / 2] complex64
    at::Tensor uni_mask;              // [B, 1, 1, S] bool or undefined (all unified lengths equal)
    at::Tensor uni_freqs;             // [B, S, hd / 2] complex64, S = tokens + pad + max caption length

    // What identifies it: (B, h, w, caption lengths...).
    std::vector<int64_t> key() const;
};

// `rope`: the DiT's per-axis complex tables (layers::complex_rope_tables), on the device the geometry is for.
DitGeometry make_geometry(const std::vector<at::Tensor>& rope, int64_t batch, int64_t h, int64_t w, const std::vector<int64_t>& cap_lens);

// The RoPE factors [B, max n, hd / 2] of per-item position ids (int [n_i, 3], CPU), zero-padded across the batch.
at::Tensor rope_factors(const std::vector<at::Tensor>& rope, const std::vector<at::Tensor>& ids);

}  // namespace cn::zimage
