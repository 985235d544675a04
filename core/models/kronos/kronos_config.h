// Kronos (shiyu-coder/Kronos; NeoQuasar/Kronos-mini/-small/-base) configuration. A cutenative Kronos model
// directory is the predictor's Hugging Face directory (config.json + model.safetensors) with the tokenizer's
// directory (NeoQuasar/Kronos-Tokenizer-2k / -base: config.json + model.safetensors) as its `tokenizer/`
// subdirectory (a symlink is fine). KronosPredictor's own arguments are read from optional keys of the
// predictor's config.json: "max_context" (default 512, as KronosPredictor; Kronos-mini was trained with 2048)
// and "clip" (default 5). LibTorch-free.
#pragma once

#include <cstdint>
#include <string>

#include "core/format/model_config.h"

namespace cn::kronos {

struct TokenizerConfig {
    int64_t d_in = 6, d_model = 256, n_heads = 4, ff_dim = 512;
    int64_t enc_blocks = 3, dec_blocks = 3;  // n_enc_layers - 1, n_dec_layers - 1 (as the reference builds them)
    int64_t s1_bits = 10, s2_bits = 10;
};

struct PredictorConfig {
    int64_t s1_bits = 10, s2_bits = 10, n_layers = 8, d_model = 512, n_heads = 8, ff_dim = 1024;
    int64_t dep_heads = 4;  // DependencyAwareLayer's fixed head count
    int64_t max_context = 512;
    double clip = 5.0;
};

struct KronosConfig {
    TokenizerConfig tok;
    PredictorConfig pred;
};

// True for a Kronos predictor config (s1_bits, s2_bits and n_layers present, no tokenizer-only keys).
bool is_kronos(const format::ModelConfig& cfg);

// Reads the predictor's config.json (given) and <dir>/tokenizer/config.json; throws cn::Error kModelFormat
// naming file and field, kUnsupported for valid setups the reference inference does not run (learn_te false:
// fixed sinusoid tables, no published model uses them; d_in other than 6; s1_bits != s2_bits, which the
// reference decoder assumes).
KronosConfig parse_kronos_config(const format::ModelConfig& cfg, const std::string& dir);

}  // namespace cn::kronos
