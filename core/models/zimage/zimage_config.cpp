#include "core/models/zimage/zimage_config.h"

#include <unistd.h>

#include "core/common/status.h"
#include "core/format/model_config.h"

namespace cn::zimage {
namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// A component's config file; a missing one is a MODEL_FORMAT error naming the component.
format::ModelConfig component_config(const std::string& dir, const std::string& component, const std::string& file) {
    const std::string sub = dir + "/" + component;
    if (!exists(sub + "/" + file)) {
        fail(Status::kModelFormat, dir + ": component '" + component + "' is missing (no " + component + "/" + file + ")");
    }
    return format::ModelConfig::load(sub, file);
}

bool is_null_or_absent(const format::ModelConfig& c, const char* key) {
    const auto& j = c.json();
    return !j.contains(key) || j.at(key).is_null();
}

// A boolean option the Z-Image pipeline runs off: absent, null or false are accepted.
void require_off(const format::ModelConfig& c, const char* key) {
    if (is_null_or_absent(c, key)) return;
    const auto& v = c.json().at(key);
    if (v.is_boolean() && !v.get<bool>()) return;
    fail(Status::kUnsupported, c.label() + ": field '" + key + "': " + v.dump() + " is not supported (the Z-Image pipeline runs it off)");
}

std::vector<int64_t> int_array(const format::ModelConfig& c, const char* key, int64_t lo, int64_t hi, size_t min_len, size_t max_len) {
    std::vector<int64_t> out;
    for (double d : c.get_double_array(key, static_cast<double>(lo), static_cast<double>(hi), min_len, max_len)) {
        if (d != static_cast<double>(static_cast<int64_t>(d))) c.fail_field(key, "expected integers");
        out.push_back(static_cast<int64_t>(d));
    }
    return out;
}

void check_class(const format::ModelConfig& c, const std::string& want) {
    const std::string got = c.get_string("_class_name", want);
    if (got != want) c.fail_field("_class_name", "expected \"" + want + "\", got \"" + got + "\"");
}

DitConfig parse_dit(const format::ModelConfig& c) {
    check_class(c, "ZImageTransformer2DModel");
    DitConfig d;
    d.in_channels = c.get_int("in_channels", 1, 1024, 16);
    d.dim = c.get_int("dim", 1, 65536, 3840);
    d.n_layers = c.get_int("n_layers", 0, 1024, 30);
    d.n_refiner_layers = c.get_int("n_refiner_layers", 0, 1024, 2);
    d.n_heads = c.get_int("n_heads", 1, 1024, 30);
    d.norm_eps = c.get_double("norm_eps", 0.0, 1.0, 1e-5);
    d.qk_norm = c.get_bool("qk_norm", true);
    d.cap_feat_dim = c.get_int("cap_feat_dim", 1, 65536, 2560);
    d.rope_theta = c.get_double("rope_theta", 1e-6, 1e12, 256.0);
    d.t_scale = c.get_double("t_scale", -1e12, 1e12, 1000.0);
    if (c.has("axes_dims")) d.axes_dims = int_array(c, "axes_dims", 2, 65536, 1, 8);
    if (c.has("axes_lens")) d.axes_lens = int_array(c, "axes_lens", 1, 1 << 20, 1, 8);
    if (c.has("all_patch_size")) d.patch_sizes = int_array(c, "all_patch_size", 1, 64, 1, 16);
    if (c.has("all_f_patch_size")) d.f_patch_sizes = int_array(c, "all_f_patch_size", 1, 64, 1, 16);
    if (!is_null_or_absent(c, "siglip_feat_dim")) {
        fail(Status::kUnsupported, c.label() + ": field 'siglip_feat_dim': the Omni variant (SigLIP image conditioning) is not supported");
    }
    if (d.axes_dims.size() != 3 || d.axes_lens.size() != 3) {
        c.fail_field("axes_dims", "the Z-Image pipeline uses 3 RoPE axes (caption/frame, height, width) in axes_dims and axes_lens");
    }
    if (d.dim % d.n_heads != 0) c.fail_field("n_heads", "dim " + std::to_string(d.dim) + " is not a multiple of n_heads");
    int64_t sum = 0;
    for (int64_t a : d.axes_dims) {
        if (a % 2 != 0) c.fail_field("axes_dims", "every axis needs an even size (complex RoPE pairs)");
        sum += a;
    }
    if (sum != d.head_dim()) {
        c.fail_field("axes_dims",
                     "sums to " + std::to_string(sum) + ", but the head dim (dim / n_heads) is " + std::to_string(d.head_dim()));
    }
    if (d.patch_sizes.size() != d.f_patch_sizes.size()) c.fail_field("all_f_patch_size", "must have as many entries as all_patch_size");
    bool has_21 = false;
    for (size_t i = 0; i < d.patch_sizes.size(); ++i) has_21 |= d.patch_sizes[i] == 2 && d.f_patch_sizes[i] == 1;
    if (!has_21) c.fail_field("all_patch_size", "the pipeline runs patch size 2 with frame patch 1 (\"2-1\"), which this config lacks");
    return d;
}

TextEncoderConfig parse_text_encoder(const format::ModelConfig& c) {
    TextEncoderConfig t;
    const std::string model_type = c.get_string("model_type", "qwen3");
    if (model_type != "qwen3") c.fail_field("model_type", "expected \"qwen3\", got \"" + model_type + "\"");
    t.vocab_size = c.get_int("vocab_size", 1, int64_t{1} << 24);
    t.hidden = c.get_int("hidden_size", 1, 65536);
    t.layers = c.get_int("num_hidden_layers", 2, 1024);
    t.heads = c.get_int("num_attention_heads", 1, 1024);
    t.kv_heads = c.get_int("num_key_value_heads", 1, 1024, t.heads);
    t.head_dim = c.get_int("head_dim", 2, 4096, t.hidden / t.heads);
    t.intermediate = c.get_int("intermediate_size", 1, 1 << 20);
    t.rms_eps = c.get_double("rms_norm_eps", 0.0, 1.0, 1e-6);
    t.max_positions = c.get_int("max_position_embeddings", 1, int64_t{1} << 30, 40960);
    t.attention_bias = c.get_bool("attention_bias", false);
    // transformers 5 keeps RoPE settings in rope_parameters; older configs have a top-level rope_theta.
    if (c.has("rope_parameters") && !c.json().at("rope_parameters").is_null()) {
        const std::string type = c.get_string("rope_parameters.rope_type", "default");
        if (type != "default") c.fail_field("rope_parameters.rope_type", "only the default RoPE is supported, got \"" + type + "\"");
        t.rope_theta = c.get_double("rope_parameters.rope_theta", 1e-6, 1e15);
    } else {
        t.rope_theta = c.get_double("rope_theta", 1e-6, 1e15, 10000.0);
        if (!is_null_or_absent(c, "rope_scaling")) c.fail_field("rope_scaling", "RoPE scaling is not supported");
    }
    const std::string act = c.get_string("hidden_act", "silu");
    if (act != "silu") c.fail_field("hidden_act", "expected \"silu\", got \"" + act + "\"");
    require_off(c, "use_sliding_window");
    if (t.heads % t.kv_heads != 0) c.fail_field("num_key_value_heads", "must divide num_attention_heads");
    if (t.head_dim % 2 != 0) c.fail_field("head_dim", "must be even (RoPE)");
    if (t.max_positions < kMaxTextTokens) c.fail_field("max_position_embeddings", "below the pipeline's 512 text tokens");
    return t;
}

VaeConfig parse_vae(const format::ModelConfig& c) {
    check_class(c, "AutoencoderKL");
    VaeConfig v;
    v.latent_channels = c.get_int("latent_channels", 1, 1024, 4);
    v.out_channels = c.get_int("out_channels", 3, 3, 3);
    if (c.has("block_out_channels")) v.block_out_channels = int_array(c, "block_out_channels", 1, 65536, 1, 8);
    v.layers_per_block = c.get_int("layers_per_block", 1, 64, 1);
    v.norm_num_groups = c.get_int("norm_num_groups", 1, 1024, 32);
    v.mid_block_add_attention = c.get_bool("mid_block_add_attention", true);
    v.use_post_quant_conv = c.get_bool("use_post_quant_conv", true);
    v.scaling_factor = c.get_double("scaling_factor", 1e-12, 1e12, 0.18215);
    if (is_null_or_absent(c, "shift_factor")) {
        c.fail_field("shift_factor", "missing or null (the Z-Image pipeline adds it to the latents before decoding)");
    }
    v.shift_factor = c.get_double("shift_factor", -1e12, 1e12);
    const std::string act = c.get_string("act_fn", "silu");
    if (act != "silu") c.fail_field("act_fn", "expected \"silu\", got \"" + act + "\"");
    if (c.has("up_block_types")) {
        const auto types = c.get_string_array("up_block_types", 16);
        if (types.size() != v.block_out_channels.size()) c.fail_field("up_block_types", "needs one entry per block_out_channels entry");
        for (const auto& t : types) {
            if (t != "UpDecoderBlock2D") c.fail_field("up_block_types", "only UpDecoderBlock2D is supported, got \"" + t + "\"");
        }
    }
    for (int64_t ch : v.block_out_channels) {
        if (ch % v.norm_num_groups != 0) c.fail_field("norm_num_groups", "does not divide block_out_channels entry " + std::to_string(ch));
    }
    return v;
}

SchedulerConfig parse_scheduler(const format::ModelConfig& c) {
    check_class(c, "FlowMatchEulerDiscreteScheduler");
    SchedulerConfig s;
    s.num_train_timesteps = c.get_int("num_train_timesteps", 1, 1 << 24, 1000);
    s.shift = c.get_double("shift", 1e-6, 1e6, 1.0);
    for (const char* k : {"use_dynamic_shifting", "use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas", "invert_sigmas",
                          "stochastic_sampling"}) {
        require_off(c, k);
    }
    if (!is_null_or_absent(c, "shift_terminal")) c.fail_field("shift_terminal", "is not supported");
    return s;
}

void check_index_entry(const format::ModelConfig& idx, const std::string& component, const std::string& library,
                       const std::vector<std::string>& classes) {
    const auto& j = idx.json();
    if (!j.contains(component)) idx.fail_field(component, "missing (the Z-Image pipeline needs it)");
    const auto& e = j.at(component);
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string()) {
        idx.fail_field(component, "expected [library, class], got " + e.dump());
    }
    if (e[0].get<std::string>() != library) idx.fail_field(component, "expected library \"" + library + "\", got " + e[0].dump());
    for (const auto& cls : classes) {
        if (e[1].get<std::string>() == cls) return;
    }
    std::string want;
    for (const auto& cls : classes) want += (want.empty() ? "" : " or ") + cls;
    idx.fail_field(component, "expected class " + want + ", got " + e[1].dump());
}

}  // namespace

bool is_pipeline_dir(const std::string& dir) { return exists(dir + "/model_index.json"); }

ZImageConfig parse_zimage_config(const std::string& dir) {
    const format::ModelConfig idx = format::ModelConfig::load(dir, "model_index.json");
    const std::string cls = idx.get_string("_class_name");
    if (cls != "ZImagePipeline") {
        fail(Status::kUnsupported, idx.label() + ": pipeline \"" + cls + "\" is not supported (this build loads ZImagePipeline)");
    }
    check_index_entry(idx, "transformer", "diffusers", {"ZImageTransformer2DModel"});
    check_index_entry(idx, "text_encoder", "transformers", {"Qwen3Model", "Qwen3ForCausalLM"});
    check_index_entry(idx, "tokenizer", "transformers", {"Qwen2Tokenizer", "Qwen2TokenizerFast"});
    check_index_entry(idx, "vae", "diffusers", {"AutoencoderKL"});
    check_index_entry(idx, "scheduler", "diffusers", {"FlowMatchEulerDiscreteScheduler"});

    ZImageConfig z;
    z.dit = parse_dit(component_config(dir, "transformer", "config.json"));
    const format::ModelConfig te = component_config(dir, "text_encoder", "config.json");
    z.text = parse_text_encoder(te);
    const format::ModelConfig vae = component_config(dir, "vae", "config.json");
    z.vae = parse_vae(vae);
    z.scheduler = parse_scheduler(component_config(dir, "scheduler", "scheduler_config.json"));
    if (!exists(dir + "/tokenizer/tokenizer.json")) {
        fail(Status::kModelFormat, dir + ": component 'tokenizer' is missing (no tokenizer/tokenizer.json)");
    }
    // Cross-component consistency: what one component produces, the next must take.
    if (z.dit.cap_feat_dim != z.text.hidden) {
        fail(Status::kModelFormat, dir + "/transformer/config.json: field 'cap_feat_dim': " + std::to_string(z.dit.cap_feat_dim) +
                                       " does not match text_encoder hidden_size " + std::to_string(z.text.hidden));
    }
    if (z.dit.in_channels != z.vae.latent_channels) {
        fail(Status::kModelFormat, dir + "/transformer/config.json: field 'in_channels': " + std::to_string(z.dit.in_channels) +
                                       " does not match vae latent_channels " + std::to_string(z.vae.latent_channels));
    }
    return z;
}

}  // namespace cn::zimage
