// Z-Image (Tongyi-MAI/Z-Image-Turbo) as diffusers lays it out: a pipeline directory with model_index.json
// (ZImagePipeline) and one subdirectory per component, each with its own config:
//   transformer/config.json           ZImageTransformer2DModel (the DiT)
//   text_encoder/config.json          transformers Qwen3Model (Qwen3-4B in the real model)
//   tokenizer/tokenizer.json          the Qwen2 byte-level BPE tokenizer (Qwen3 vocabulary)
//   vae/config.json                   AutoencoderKL (the Flux VAE; only its decoder runs)
//   scheduler/scheduler_config.json   FlowMatchEulerDiscreteScheduler
// Every value the computation depends on is read and range-checked here; options of those classes that the
// Z-Image pipeline never uses are rejected (kUnsupported naming the file and field) instead of ignored, so a
// directory either loads into exactly what diffusers would run or fails to load. LibTorch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cn::zimage {

struct DitConfig {
    int64_t in_channels = 16;  // latent channels (= out_channels)
    int64_t dim = 3840;
    int64_t n_layers = 30;
    int64_t n_refiner_layers = 2;
    int64_t n_heads = 30;
    double norm_eps = 1e-5;
    bool qk_norm = true;
    int64_t cap_feat_dim = 2560;
    double rope_theta = 256.0;
    double t_scale = 1000.0;
    std::vector<int64_t> axes_dims{32, 48, 48};
    std::vector<int64_t> axes_lens{1536, 512, 512};
    std::vector<int64_t> patch_sizes{2};    // all_patch_size: the pipeline runs "2-1"
    std::vector<int64_t> f_patch_sizes{1};  // all_f_patch_size
    int64_t head_dim() const { return dim / n_heads; }
    int64_t ffn_dim() const { return static_cast<int64_t>(static_cast<double>(dim) / 3.0 * 8.0); }  // int(dim / 3 * 8)
    int64_t adaln_dim() const { return dim < 256 ? dim : 256; }                                     // min(dim, 256)
};

struct TextEncoderConfig {
    int64_t vocab_size = 151936;
    int64_t hidden = 2560;
    int64_t layers = 36;
    int64_t heads = 32;
    int64_t kv_heads = 8;
    int64_t head_dim = 128;
    int64_t intermediate = 9728;
    double rms_eps = 1e-6;
    double rope_theta = 1e6;
    int64_t max_positions = 40960;
    bool attention_bias = false;
};

struct VaeConfig {
    int64_t latent_channels = 16;
    int64_t out_channels = 3;
    std::vector<int64_t> block_out_channels{128, 256, 512, 512};
    int64_t layers_per_block = 2;
    int64_t norm_num_groups = 32;
    bool mid_block_add_attention = true;
    bool use_post_quant_conv = false;
    double scaling_factor = 0.3611;
    double shift_factor = 0.1159;
    int64_t scale_factor() const { return int64_t{1} << (block_out_channels.size() - 1); }  // vae_scale_factor
};

struct SchedulerConfig {
    int64_t num_train_timesteps = 1000;
    double shift = 3.0;
};

struct ZImageConfig {
    DitConfig dit;
    TextEncoderConfig text;
    VaeConfig vae;
    SchedulerConfig scheduler;
    // Image sides must be multiples of this (vae_scale_factor * 2: 16 for the real model).
    int64_t size_multiple() const { return vae.scale_factor() * 2; }
};

// The recipe cutenative uses when a request asks for the model's default: Z-Image Turbo's (8 steps, guidance 0,
// i.e. no classifier-free guidance), not ZImagePipeline's argument defaults (50 steps, guidance 5), which suit the
// base model. Documented in the header.
constexpr int32_t kDefaultSteps = 8;
constexpr float kDefaultGuidance = 0.0f;
// The pipeline's max_sequence_length: templated prompts are truncated to this many tokens.
constexpr int64_t kMaxTextTokens = 512;

// True if `dir` has a model_index.json (a diffusers pipeline directory).
bool is_pipeline_dir(const std::string& dir);

// Reads model_index.json and every component's config; throws cn::Error kModelFormat naming the component, file
// and field for missing or inconsistent components, kUnsupported for pipelines other than ZImagePipeline and for
// component options the Z-Image pipeline does not run (e.g. the Omni variant's siglip_feat_dim, dynamic shifting).
ZImageConfig parse_zimage_config(const std::string& dir);

}  // namespace cn::zimage
