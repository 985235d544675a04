// A sentence-embedding model directory in the sentence-transformers layout around a BERT encoder
// (e.g. sentence-transformers/all-MiniLM-L6-v2): config.json (BertModel), modules.json (Transformer ->
// Pooling -> optional Normalize), 1_Pooling/config.json, sentence_bert_config.json (max_seq_length),
// tokenizer_config.json (lower-casing, accents, CJK) and vocab.txt. LibTorch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/format/model_config.h"

namespace cn::bert {

enum class Pooling {
    kMean,
    kCls
};

struct BertConfig {
    int64_t hidden = 384;
    int64_t layers = 6;
    int64_t heads = 12;
    int64_t intermediate = 1536;
    int64_t vocab_size = 30522;
    int64_t max_positions = 512;
    int64_t type_vocab_size = 2;
    double layer_norm_eps = 1e-12;
    // sentence-transformers
    int64_t max_seq_length = 256;  // word pieces per text, [CLS] and [SEP] included
    Pooling pooling = Pooling::kMean;
    // tokenizer
    bool lowercase = true;
    std::optional<bool> strip_accents;
    bool handle_cjk = true;

    int64_t head_dim() const { return hidden / heads; }
};

// True for a BERT encoder (model_type "bert", or a BertModel architecture).
bool is_bert(const format::ModelConfig& cfg);

// Reads config.json (given) and the sentence-transformers files of `dir`; throws cn::Error: kModelFormat
// naming file and field, kUnsupported for valid setups this build cannot run (activation other than exact
// GELU, relative positions, pooling other than mean or CLS, modules other than Transformer / Pooling /
// Normalize).
BertConfig parse_bert_config(const format::ModelConfig& cfg, const std::string& dir);

}  // namespace cn::bert
