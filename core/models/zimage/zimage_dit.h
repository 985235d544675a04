// Z-Image's DiT (diffusers ZImageTransformer2DModel, basic text-to-image mode), op for op as diffusers runs it:
//   t -> sinusoidal embedding (fp32, cos first) -> t_embedder MLP                         = adaLN input
//   latent [C, 1, h, w] -> 2x2 patches (feature order ph, pw, c) -> all_x_embedder."2-1" -> pad rows to a
//     multiple of 32 with x_pad_token -> noise_refiner blocks (modulated)
//   caption [L, cap_dim] -> cap_embedder (RMSNorm + Linear) -> pad to a multiple of 32 with cap_pad_token ->
//     context_refiner blocks (not modulated; independent of t, so computed once per prompt: Captions)
//   unified [image rows, caption rows] -> layers (modulated) -> final layer (LayerNorm, 1 + scale, Linear)
//   -> the first N rows unpatchified to [C, h, w].
// Blocks: sandwich RMSNorms around attention (q/k RMSNorm per head, 3-axis complex RoPE, SDPA) and the SwiGLU
// FFN; modulation scale 1 + s and gate tanh(g), no shift. Items of a batch whose sequences differ in length are
// padded with zeros and masked as keys, exactly as diffusers batches them (CFG). Shapes, position ids and masks:
// zimage_geometry.h (built once per request).
//
// Two block paths, one weight set. Eager: diffusers' ops. Fused (`fused` = true): the 32 modulated blocks' adaLN
// projections of a forward as one GEMM; q|k|v as one GEMM; RMSNorm x (1 + scale) and x + tanh(gate) x RMSNorm(y)
// as one row kernel each; per-head q/k RMSNorm + RoPE + the attention layout as one kernel; w1|w3 as one GEMM and
// silu x mul as one kernel (kernels/modulated_norm.h, kernels/qk_norm_rope.h, kernels/swiglu.h). Its rounding
// points are eager's; its sums' orders are not (GEMM shapes, the norms' reductions), so it is not bit-equal to
// eager: docs/benchmarks.md gives the distance. The fused weights are row slices of one tensor each, registered
// in the weight index under their checkpoint names, so adapters patch both paths at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/layers/linear.h"
#include "core/models/zimage/zimage_config.h"
#include "core/models/zimage/zimage_geometry.h"

namespace cn {
class Weights;
class WeightIndex;
}  // namespace cn

namespace cn::zimage {

class ZImageDit {
public:
    // Declares the weights into `w`; unused patch sizes' embedders/final layers are accepted and not loaded.
    ZImageDit(const DitConfig& c, Weights& w);
    // After load_all: the RoPE tables on `device`, and the fused path's weights (q|k|v, w1|w3, every adaLN
    // projection) made single tensors whose row slices the per-layer weights become; `index` (the transformer's
    // weight index) is updated to the slices.
    void finish(c10::Device device, WeightIndex& index);

    // The caption side of a batch: embedded, padded, refined; depends only on the captions.
    struct Captions {
        at::Tensor feats;           // [B, max Lc, dim] after the context refiner
        std::vector<int64_t> lens;  // Lc per item (multiples of 32)
    };
    // caps: per item [L_i, cap_dim] in the weights' dtype (L_i >= 1).
    Captions embed_captions(const std::vector<at::Tensor>& caps, bool fused = false) const;

    // The geometry of a forward over B latents of h x w with these captions' lengths.
    DitGeometry geometry(int64_t batch, int64_t h, int64_t w, const std::vector<int64_t>& cap_lens) const;

    // One forward. latents: [B, C, h, w] in the weights' dtype (h, w even); t: [B] fp32 (the pipeline's
    // (1000 - timestep) / 1000; scaled by t_scale here); cap_feats: Captions::feats of the same batch; g: its
    // geometry. Returns [B, C, h, w] in the weights' dtype. Device work only (no host synchronisation, no host
    // tensors): capturable in a CUDA graph.
    at::Tensor forward(const at::Tensor& latents, const at::Tensor& t, const at::Tensor& cap_feats, const DitGeometry& g,
                       bool fused = false) const;

    const DitConfig& config() const { return c_; }

    // Experimental (CN_ZIMAGE_ATTENTION=cudnn, off by default): the fused path's unmasked attention through cuDNN's
    // SDPA (Hopper's FlashAttention-3-class kernels) instead of ATen's SDPA choice; bf16/fp16 on CUDA only.
    void use_cudnn_attention(bool on) { cudnn_attention_ = on; }

private:
    struct Block;
    at::Tensor block(const Block& b, at::Tensor x, const at::Tensor& mask, const at::Tensor& freqs, const at::Tensor& mod,
                     bool fused) const;
    at::Tensor block_fused(const Block& b, at::Tensor x, const at::Tensor& mask, const at::Tensor& freqs, const at::Tensor& mod) const;

    DitConfig c_;
    layers::Linear x_embed_, t_mlp0_, t_mlp2_, cap_linear_, final_mod_, final_linear_;
    layers::Linear mod_all_;  // every modulated block's adaLN projection (noise refiner, then layers): fused path
    at::Tensor cap_norm_, x_pad_, cap_pad_;
    std::vector<std::shared_ptr<Block>> noise_refiner_, context_refiner_, layers_;
    std::vector<at::Tensor> rope_;
    bool cudnn_attention_ = false;
};

}  // namespace cn::zimage
