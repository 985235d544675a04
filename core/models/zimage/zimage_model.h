// Z-Image Turbo text-to-image (diffusers ZImagePipeline) behind the Model interface: loads the pipeline
// directory (zimage_config.h), runs tokenizer -> Qwen3 encoder -> DiT denoising loop (FlowMatch Euler, optional
// CFG) -> VAE decoder -> RGB8. Memory (real model, bf16): DiT 12.3 GB, text encoder 7.8 GB (35 of its 36 layers
// are loaded), VAE decoder 0.1 GB, all on the model's device; per call, the latents, one DiT batch's activations
// (two with CFG) and the decoder's activations (the largest: the last up block's, 128 x H x W).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/runtime/model.h"

namespace cn::zimage {

class Qwen3Encoder;
class ZImageDit;
class VaeDecoder;
struct ZImageConfig;

// `dir` has a model_index.json naming ZImagePipeline.
std::unique_ptr<Model> load_zimage(const std::string& dir, const ModelOptions& options);

// Everything load_zimage checks (configs, tokenizer, every component's weight names, shapes and dtypes) without
// loading a weight: throws as load_zimage would. Used to check a full-size layout in tests.
void check_zimage_directory(const std::string& dir);

// The intermediates of one generation, as the parity tests compare them with the reference's (CPU tensors).
struct ZImageTrace {
    std::vector<int32_t> pos_ids, neg_ids;  // the text encoder's tokens (neg only with CFG)
    at::Tensor pos_embeds, neg_embeds;      // [L, cap_dim] fp32
    at::Tensor sigmas, timesteps;           // [N + 1], [N] fp32
    std::vector<at::Tensor> latents;        // initial noise, then after every step: [C, h, w] fp32
    at::Tensor dit_out;                     // the first DiT call's output [B, C, h, w] fp32 (B = 2 with CFG)
    at::Tensor decoded;                     // the VAE decoder's output [3, H, W] fp32
};
// Model::generate with a trace. `model` must be a Z-Image model (else kInvalidArgument).
void generate_traced(Model& model, const GenerateRequest& req, RunContext& run, uint8_t* out, size_t out_bytes, ZImageTrace* trace);

// The components of a loaded Z-Image model, for tests that feed them the reference's inputs.
struct ZImageParts {
    const ZImageConfig* config = nullptr;
    const Qwen3Encoder* encoder = nullptr;
    const ZImageDit* dit = nullptr;
    const VaeDecoder* vae = nullptr;
};
ZImageParts zimage_parts(const Model& model);

}  // namespace cn::zimage
