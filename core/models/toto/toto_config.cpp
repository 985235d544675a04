#include "core/models/toto/toto_config.h"

#include <string>

#include "core/common/status.h"

namespace cn::toto {
namespace {
constexpr const char* kScaler = "<class 'model.scaler.CausalPatchStdMeanScaler'>";
constexpr const char* kMixture = "<class 'model.distribution.MixtureOfStudentTsOutput'>";
}  // namespace

int64_t TotoConfig::time_layers() const {
    int64_t n = 0;
    for (bool s : spacewise) n += s ? 0 : 1;
    return n;
}

bool is_toto(const format::ModelConfig& cfg) {
    return cfg.has("scaler_cls") && cfg.has("output_distribution_classes") && cfg.has("patch_size") && cfg.has("embed_dim");
}

TotoConfig parse_toto_config(const format::ModelConfig& cfg) {
    TotoConfig c;
    c.patch_size = cfg.get_int("patch_size", 1, 4096);
    c.stride = cfg.get_int("stride", 1, 4096);
    c.embed_dim = cfg.get_int("embed_dim", 1, 16384);
    c.num_layers = cfg.get_int("num_layers", 1, 256);
    c.num_heads = cfg.get_int("num_heads", 1, 256);
    c.mlp_hidden_dim = cfg.get_int("mlp_hidden_dim", 1, 1 << 18);
    (void)cfg.get_double("dropout", 0.0, 1.0);  // required by the reference; unused at inference
    c.spacewise_every_n_layers = cfg.get_int("spacewise_every_n_layers", -1, 256);
    c.spacewise_first = cfg.get_bool("spacewise_first", true);
    c.stabilize_with_global = cfg.get_bool("stabilize_with_global", true);
    c.scale_factor_exponent = cfg.get_double("scale_factor_exponent", -300.0, 300.0, 10.0);
    (void)cfg.get_bool("use_memory_efficient_attention", true);
    if (c.stride != c.patch_size) {
        cfg.fail_field("stride",
                       "must equal patch_size (" + std::to_string(c.patch_size) + "): the reference's scaler and decoding assume it");
    }
    if (c.embed_dim % c.num_heads != 0 || c.head_dim() % 2 != 0) {
        cfg.fail_field("num_heads", "embed_dim " + std::to_string(c.embed_dim) + " must split into " + std::to_string(c.num_heads) +
                                        " heads of an even size (rotary pairs)");
    }
    const std::string scaler = cfg.get_string("scaler_cls");
    if (scaler != kScaler) {
        fail(Status::kUnsupported,
             cfg.label() + ": scaler_cls '" + scaler + "' (this build runs " + kScaler + ", the published models' scaler)");
    }
    const auto dists = cfg.get_string_array("output_distribution_classes", 8);
    if (dists.empty() || dists[0] != kMixture) {
        fail(Status::kUnsupported, cfg.label() + ": output_distribution_classes[0] '" + (dists.empty() ? std::string() : dists[0]) +
                                       "' (this build runs " + kMixture + ", the published models' head)");
    }
    if (!cfg.has("output_distribution_kwargs.k_components")) {
        cfg.fail_field("output_distribution_kwargs", "needs k_components (MixtureOfStudentTsOutput has no default)");
    }
    c.k_components = cfg.get_int("output_distribution_kwargs.k_components", 1, 4096);
    // Transformer._get_layer_types: blocks of spacewise_every_n_layers layers, the space-wise one first or last in
    // each; -1: every layer time-wise.
    c.spacewise.assign(static_cast<size_t>(c.num_layers), false);
    const int64_t n = c.spacewise_every_n_layers;
    if (n != -1) {
        if (n < 1 || c.num_layers % n != 0) {
            cfg.fail_field("spacewise_every_n_layers", "must be -1 or divide num_layers (" + std::to_string(c.num_layers) + ")");
        }
        for (int64_t i = 0; i < c.num_layers; ++i) c.spacewise[static_cast<size_t>(i)] = c.spacewise_first ? i % n == 0 : i % n == n - 1;
    }
    return c;
}

}  // namespace cn::toto
