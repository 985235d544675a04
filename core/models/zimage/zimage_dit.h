// Z-Image's DiT (diffusers ZImageTransformer2DModel, basic text-to-image mode), op for op as diffusers runs it:
//   t -> sinusoidal embedding (fp32, cos first) -> t_embedder MLP                         = adaLN input
//   latent [C, 1, h, w] -> 2x2 patches (feature order ph, pw, c) -> all_x_embedder."2-1" -> pad rows to a
//     multiple of 32 with x_pad_token -> noise_refiner blocks (modulated)
//   caption [L, cap_dim] -> cap_embedder (RMSNorm + Linear) -> pad to a multiple of 32 with cap_pad_token ->
//     context_refiner blocks (not modulated; independent of t, so computed once per prompt: Captions)
//   unified [image rows, caption rows] -> layers (modulated) -> final layer (LayerNorm, 1 + scale, Linear)
//   -> the first N rows unpatchified to [C, h, w].
// Blocks: sandwich RMSNorms around attention (q/k RMSNorm per head, 3-axis complex RoPE, SDPA) and the SwiGLU
// FFN; modulation scale 1 + s and gate tanh(g), no shift. Position ids: caption row i (pads included) is
// (1 + i, 0, 0); image token (h, w) is (Lc + 1, h, w); image pad rows (0, 0, 0). Items of a batch whose
// sequences differ in length are padded with zeros and masked as keys, exactly as diffusers batches them (CFG).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/layers/linear.h"
#include "core/models/zimage/zimage_config.h"

namespace cn {
class Weights;
}

namespace cn::zimage {

class ZImageDit {
public:
    // Declares the weights into `w`; unused patch sizes' embedders/final layers are accepted and not loaded.
    ZImageDit(const DitConfig& c, Weights& w);
    // After load_all: the RoPE tables on `device`.
    void finish(c10::Device device);

    // The caption side of a batch: embedded, padded, refined; depends only on the captions.
    struct Captions {
        at::Tensor feats;           // [B, max Lc, dim] after the context refiner
        std::vector<int64_t> lens;  // Lc per item (multiples of 32)
    };
    // caps: per item [L_i, cap_dim] in the weights' dtype (L_i >= 1).
    Captions embed_captions(const std::vector<at::Tensor>& caps) const;

    // One forward. latents: [B, C, h, w] in the weights' dtype (h, w even); t: [B] fp32 (the pipeline's
    // (1000 - timestep) / 1000; scaled by t_scale here). Returns [B, C, h, w] in the weights' dtype.
    at::Tensor forward(const at::Tensor& latents, const at::Tensor& t, const Captions& caps) const;

private:
    struct Block;
    at::Tensor block(const Block& b, const at::Tensor& x, const at::Tensor& mask, const at::Tensor& freqs, const at::Tensor& adaln) const;
    at::Tensor freqs_of(const std::vector<at::Tensor>& ids) const;  // per item [n_i, 3] int -> padded [B, max, hd/2]

    DitConfig c_;
    layers::Linear x_embed_, t_mlp0_, t_mlp2_, cap_linear_, final_mod_, final_linear_;
    at::Tensor cap_norm_, x_pad_, cap_pad_;
    std::vector<std::shared_ptr<Block>> noise_refiner_, context_refiner_, layers_;
    std::vector<at::Tensor> rope_;
};

}  // namespace cn::zimage
