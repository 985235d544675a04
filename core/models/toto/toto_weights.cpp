#include "core/models/toto/toto_weights.h"

#include <memory>

#include "core/format/checkpoint.h"
#include "core/runtime/weights.h"

namespace cn::toto {

TotoWeights load_weights(const std::string& dir, const TotoConfig& c, const ModelOptions& options) {
    const WeightLoadOptions wo{options.device, options.dtype, options.mmap_weights, options.check_tensors};
    auto ck = format::Checkpoint::open(dir);
    const auto& names = ck->tensors();
    // Toto.state_dict() names its backbone "model."; a checkpoint of the bare backbone has no prefix.
    const std::string p =
        names.count("model.patch_embed.projection.weight") || !names.count("patch_embed.projection.weight") ? "model." : "";
    Weights w(ck, wo);
    for (const auto& [name, ref] : names) {
        if (name.size() >= 16 && name.compare(name.size() - 16, 16, "rotary_emb.freqs") == 0) w.allow_unused(name);
    }
    TotoWeights out;
    const int64_t D = c.embed_dim, P = c.patch_size, H = c.mlp_hidden_dim, K = c.k_components;
    layers::declare_linear(w, out.patch_embed, p + "patch_embed.projection", D, P);
    out.layers.resize(static_cast<size_t>(c.num_layers));  // sized before declaring into them
    for (int64_t i = 0; i < c.num_layers; ++i) {
        Layer& l = out.layers[static_cast<size_t>(i)];
        const std::string lp = p + "transformer.layers." + std::to_string(i);
        w.declare(l.norm1, lp + ".norm1.scale", {D});
        w.declare(l.norm2, lp + ".norm2.scale", {D});
        layers::declare_linear(w, l.qkv, lp + ".attention.wQKV", 3 * D, D);
        layers::declare_linear(w, l.out, lp + ".attention.wO", D, D);
        // SwiGLU: the unfused names, or xformers' fused-module names (mlp.0.w12 / mlp.0.w3).
        const bool fused_names = names.count(lp + ".mlp.0.w12.weight") > 0;
        layers::declare_linear(w, l.up, lp + (fused_names ? ".mlp.0.w12" : ".mlp.0"), 2 * H, D);
        layers::declare_linear(w, l.down, lp + (fused_names ? ".mlp.0.w3" : ".mlp.2"), D, H);
        l.spacewise = c.spacewise[static_cast<size_t>(i)];
    }
    layers::declare_linear(w, out.unembed, p + "unembed", D * P, D);
    const std::string h = p + "output_distribution.";
    layers::declare_linear(w, out.df, h + "df", K, D);
    layers::declare_linear(w, out.loc, h + "loc_proj", K, D);
    layers::declare_linear(w, out.scale, h + "scale_proj", K, D);
    layers::declare_linear(w, out.mixture_weights, h + "mixture_weights", K, D);
    w.validate();
    w.load_all();
    out.n_parameters = w.expected_elements();
    out.index = w.index();
    return out;
}

}  // namespace cn::toto
