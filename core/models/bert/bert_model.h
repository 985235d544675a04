// Sentence embeddings with a BERT encoder in the sentence-transformers layout (all-MiniLM-L6-v2 and the
// like): WordPiece tokens -> BERT (absolute positions, token type 0, post-LayerNorm blocks, exact GELU)
// -> mean (or CLS) pooling -> L2 normalisation, as SentenceTransformer.encode computes it.
#pragma once

#include <memory>
#include <string>

#include "core/format/model_config.h"
#include "core/runtime/model.h"

namespace cn::bert {

// `config` is the directory's config.json (is_bert() is true for it).
std::unique_ptr<Model> load_bert(const std::string& dir, const format::ModelConfig& config, const ModelOptions& options);

}  // namespace cn::bert
