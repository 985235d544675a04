#include "core/models/chronos2/chronos2_config.h"

#include "core/common/status.h"

namespace cn::chronos2 {

bool is_chronos2(const format::ModelConfig& cfg) {
    if (!cfg.has("architectures")) return false;
    for (const auto& a : cfg.get_string_array("architectures", 16)) {
        if (a == "Chronos2Model") return true;
    }
    return false;
}

Chronos2Config parse_chronos2_config(const format::ModelConfig& cfg) {
    Chronos2Config c;
    c.d_model = cfg.get_int("d_model", 1, 65536, 512);
    c.d_kv = cfg.get_int("d_kv", 1, 4096, 64);
    c.d_ff = cfg.get_int("d_ff", 1, 262144, 2048);
    c.num_layers = cfg.get_int("num_layers", 1, 256, 6);
    c.num_heads = cfg.get_int("num_heads", 1, 1024, 8);
    c.layer_norm_epsilon = cfg.get_double("layer_norm_epsilon", 0.0, 1.0, 1e-6);
    c.rope_theta = cfg.get_double("rope_theta", 1.0, 1e12, 10000.0);
    if (c.d_kv % 2 != 0) cfg.fail_field("d_kv", "must be even for rotary embeddings");
    const std::string ff = cfg.get_string("feed_forward_proj", "relu");
    if (ff != "relu") {
        fail(Status::kUnsupported, cfg.label() + ": field 'feed_forward_proj': \"" + ff + "\" is not supported (only \"relu\")");
    }

    if (!cfg.has("chronos_config")) cfg.fail_field("chronos_config", "missing");
    c.context_length = cfg.get_int("chronos_config.context_length", 1, 1 << 20);
    const int64_t in_patch = cfg.get_int("chronos_config.input_patch_size", 1, 4096);
    const int64_t stride = cfg.get_int("chronos_config.input_patch_stride", 1, 4096);
    const int64_t out_patch = cfg.get_int("chronos_config.output_patch_size", 1, 4096);
    if (out_patch != in_patch) {
        cfg.fail_field("chronos_config.output_patch_size", "must equal input_patch_size (" + std::to_string(in_patch) + ")");
    }
    if (stride != in_patch) {
        fail(Status::kUnsupported, cfg.label() + ": field 'chronos_config.input_patch_stride': overlapping patches (stride " +
                                       std::to_string(stride) + " != patch size " + std::to_string(in_patch) + ") are not supported");
    }
    c.patch_size = in_patch;
    c.max_output_patches = cfg.get_int("chronos_config.max_output_patches", 1, 1 << 16, 1);
    c.time_encoding_scale = cfg.get_double("chronos_config.time_encoding_scale", 1e-30, 1e30, static_cast<double>(c.context_length));
    c.use_arcsinh = cfg.get_bool("chronos_config.use_arcsinh", false);
    if (!cfg.get_bool("chronos_config.use_reg_token", false)) {
        fail(Status::kUnsupported, cfg.label() +
                                       ": field 'chronos_config.use_reg_token': false is not supported "
                                       "(the reference forward requires the REG token)");
    }
    c.quantiles = cfg.get_double_array("chronos_config.quantiles", 0.0, 1.0, 1, 1024);
    for (size_t i = 0; i < c.quantiles.size(); ++i) {
        const std::string at = "chronos_config.quantiles[" + std::to_string(i) + "]";
        if (c.quantiles[i] <= 0.0 || c.quantiles[i] >= 1.0) cfg.fail_field(at, "must lie in (0, 1)");
        if (i > 0 && c.quantiles[i] <= c.quantiles[i - 1]) cfg.fail_field(at, "quantiles must be strictly increasing");
    }
    return c;
}

}  // namespace cn::chronos2
