#include "core/models/kronos/kronos_config.h"

#include <unistd.h>

#include "core/common/status.h"

namespace cn::kronos {

bool is_kronos(const format::ModelConfig& cfg) {
    return cfg.has("s1_bits") && cfg.has("s2_bits") && cfg.has("n_layers") && !cfg.has("n_enc_layers");
}

KronosConfig parse_kronos_config(const format::ModelConfig& cfg, const std::string& dir) {
    KronosConfig c;
    PredictorConfig& p = c.pred;
    p.s1_bits = cfg.get_int("s1_bits", 1, 16);
    p.s2_bits = cfg.get_int("s2_bits", 1, 16);
    p.n_layers = cfg.get_int("n_layers", 1, 256);
    p.d_model = cfg.get_int("d_model", 1, 16384);
    p.n_heads = cfg.get_int("n_heads", 1, 256);
    p.ff_dim = cfg.get_int("ff_dim", 1, 1 << 18);
    p.max_context = cfg.get_int("max_context", 1, 1 << 16, 512);
    p.clip = cfg.get_double("clip", 1e-6, 1e30, 5.0);
    if (!cfg.get_bool("learn_te", true)) {
        fail(Status::kUnsupported, cfg.label() + ": learn_te false (fixed sinusoid time embeddings) is not supported");
    }
    auto head_dims = [&](const std::string& label, int64_t d, int64_t h, const char* what) {
        if (d % h != 0 || (d / h) % 2 != 0) {
            fail(Status::kModelFormat, label + ": d_model " + std::to_string(d) + " must split into " + std::to_string(h) + " " + what +
                                           " heads of an even size (RoPE)");
        }
    };
    head_dims(cfg.label(), p.d_model, p.n_heads, "attention");
    head_dims(cfg.label(), p.d_model, p.dep_heads, "dependency-layer");

    const std::string tdir = dir + "/tokenizer";
    if (::access((tdir + "/config.json").c_str(), F_OK) != 0) {
        fail(Status::kModelFormat, dir +
                                       ": no tokenizer/ directory (put the Kronos tokenizer's config.json and "
                                       "model.safetensors there, e.g. a symlink to Kronos-Tokenizer-base)");
    }
    const auto t = format::ModelConfig::load(tdir);
    TokenizerConfig& k = c.tok;
    k.d_in = t.get_int("d_in", 1, 64);
    k.d_model = t.get_int("d_model", 1, 16384);
    k.n_heads = t.get_int("n_heads", 1, 256);
    k.ff_dim = t.get_int("ff_dim", 1, 1 << 18);
    k.enc_blocks = t.get_int("n_enc_layers", 1, 256) - 1;
    k.dec_blocks = t.get_int("n_dec_layers", 1, 256) - 1;
    k.s1_bits = t.get_int("s1_bits", 1, 16);
    k.s2_bits = t.get_int("s2_bits", 1, 16);
    if (k.d_in != 6) fail(Status::kUnsupported, t.label() + ": d_in " + std::to_string(k.d_in) + " (Kronos inputs are 6 channels)");
    head_dims(t.label(), k.d_model, k.n_heads, "attention");
    if (k.s1_bits != k.s2_bits) fail(Status::kUnsupported, t.label() + ": s1_bits != s2_bits (the reference decoder assumes equal halves)");
    if (k.s1_bits != p.s1_bits || k.s2_bits != p.s2_bits) {
        fail(Status::kModelFormat, dir + ": the tokenizer's s1_bits/s2_bits differ from the predictor's");
    }
    return c;
}

}  // namespace cn::kronos
