#include "core/models/bert/bert_model.h"

#include <cmath>
#include <cstring>

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/index_select.h>

#include "core/common/status.h"
#include "core/format/checkpoint.h"
#include "core/layers/attention.h"
#include "core/layers/linear.h"
#include "core/layers/mlp.h"
#include "core/layers/norm.h"
#include "core/models/bert/bert_config.h"
#include "core/runtime/weights.h"
#include "core/tokenizers/wordpiece.h"

namespace cn::bert {
namespace {

using layers::Linear;
using layers::Norm;

struct Layer {
    Linear q, k, v, o, up, down;
    Norm attn_norm, out_norm;
};

struct BertWeights {
    at::Tensor word, pos, type;
    Norm emb_norm;
    std::vector<Layer> layers;
};

text::WordPieceOptions tokenizer_options(const BertConfig& c) {
    text::WordPieceOptions o;
    o.lowercase = c.lowercase;
    o.strip_accents = c.strip_accents;
    o.handle_cjk = c.handle_cjk;
    o.max_length = static_cast<size_t>(c.max_seq_length);
    return o;
}

class BertEmbedder final : public Model {
public:
    BertEmbedder(ModelOptions options, nlohmann::json config, BertConfig cfg, BertWeights w, text::WordPieceTokenizer tok,
                 uint64_t n_parameters)
        : Model(options, std::move(config)), cfg_(cfg), w_(std::move(w)), tok_(std::move(tok)) {
        n_parameters_ = n_parameters;
        weight_bytes_ = n_parameters * c10::elementSize(options.dtype);
    }

    cn_model_kind kind() const override { return CN_MODEL_KIND_EMBEDDING; }
    int64_t embedding_dim() const override { return cfg_.hidden; }

    void fill_info(cn_model_info& info) const override {
        Model::fill_info(info);
        info.embedding_dim = cfg_.hidden;
        info.max_tokens = cfg_.max_seq_length;
    }

    void embed(const std::vector<std::string>& texts, RunContext& run, float* out, size_t out_count) override {
        const size_t dim = static_cast<size_t>(cfg_.hidden);
        if (texts.empty()) fail(Status::kInvalidArgument, "texts: at least one text is needed");
        if (out_count / dim < texts.size()) {
            fail(Status::kInvalidArgument, "out_count: " + std::to_string(out_count) + " floats is too small for " +
                                               std::to_string(texts.size()) + " texts x " + std::to_string(dim));
        }
        // Tokenise everything first: a bad text fails the call before any work (and before out is touched).
        std::vector<std::vector<int32_t>> ids(texts.size());
        for (size_t i = 0; i < texts.size(); ++i) {
            text::Encoding e = tok_.encode(texts[i]);
            if (!e.ok()) fail(e.status, "texts[" + std::to_string(i) + "]: " + e.message);
            ids[i] = std::move(e.ids);
        }
        // One text per pass: no padding, and a text's embedding never depends on the others of the call.
        for (size_t i = 0; i < texts.size(); ++i) {
            run.check();
            const at::Tensor e = encode(ids[i]).to(at::kCPU).contiguous();
            std::memcpy(out + i * dim, e.const_data_ptr<float>(), dim * sizeof(float));
        }
    }

private:
    // [hidden] fp32: pooled and L2-normalised embedding of one token sequence.
    at::Tensor encode(const std::vector<int32_t>& tokens) const {
        const int64_t T = static_cast<int64_t>(tokens.size());
        const int64_t H = cfg_.hidden, heads = cfg_.heads;
        const auto dev = options_.device;
        at::Tensor ids = at::empty({T}, at::TensorOptions().dtype(at::kLong));
        int64_t* p = ids.data_ptr<int64_t>();
        for (int64_t t = 0; t < T; ++t) p[t] = tokens[t];
        ids = ids.to(dev);
        const double eps = cfg_.layer_norm_eps;
        at::Tensor x = at::index_select(w_.word, 0, ids) + w_.pos.slice(0, 0, T) + w_.type.select(0, 0);
        x = layers::layer_norm(x, w_.emb_norm, eps).unsqueeze(0);  // [1, T, H]
        for (const Layer& l : w_.layers) {
            const at::Tensor a =
                layers::attention(layers::split_heads(layers::linear(x, l.q), heads), layers::split_heads(layers::linear(x, l.k), heads),
                                  layers::split_heads(layers::linear(x, l.v), heads));
            x = layers::layer_norm(layers::linear(layers::merge_heads(a), l.o) + x, l.attn_norm, eps);
            x = layers::layer_norm(layers::gelu_mlp(x, l.up, l.down) + x, l.out_norm, eps);  // exact (erf) GELU
        }
        // Mean pooling as sentence-transformers does it: sum and divide in fp32 (also for bf16/fp16 token embeddings),
        // then round once to the model's dtype; Normalize (F.normalize: x / max(||x||, 1e-12)) in that dtype.
        at::Tensor pooled = cfg_.pooling == Pooling::kMean
                                ? (x.sum(1, /*keepdim=*/false, at::kFloat) / static_cast<double>(T)).to(x.scalar_type())
                                : x.select(1, 0);
        pooled = pooled.view({H});
        return (pooled / pooled.norm().clamp_min(1e-12)).to(at::kFloat);
    }

    BertConfig cfg_;
    BertWeights w_;
    text::WordPieceTokenizer tok_;
};

}  // namespace

std::unique_ptr<Model> load_bert(const std::string& dir, const format::ModelConfig& config, const ModelOptions& options) {
    const BertConfig c = parse_bert_config(config, dir);
    text::WordPieceTokenizer tok = text::WordPieceTokenizer::from_vocab_file(dir + "/vocab.txt", tokenizer_options(c));
    if (static_cast<int64_t>(tok.vocab_size()) != c.vocab_size) {
        fail(Status::kModelFormat, dir + "/vocab.txt: " + std::to_string(tok.vocab_size()) + " tokens, but config.json says vocab_size " +
                                       std::to_string(c.vocab_size));
    }
    auto checkpoint = format::Checkpoint::open(dir);
    Weights w(checkpoint, WeightLoadOptions{options.device, options.dtype, options.mmap_weights, options.check_tensors});
    // Checkpoints saved from BertModel have bare names; some carry a "bert." prefix.
    const std::string pre = checkpoint->find("bert.embeddings.word_embeddings.weight") ? "bert." : "";
    for (const auto& [name, ref] : checkpoint->tensors()) {
        // Unused parts of BERT checkpoints: the pooler, the MLM/NSP heads, the position-id buffer.
        if (name.rfind(pre + "pooler.", 0) == 0 || name.rfind("cls.", 0) == 0 || name == pre + "embeddings.position_ids") {
            w.allow_unused(name);
        }
    }
    // The weight list: every tensor named once, with its shape and destination.
    const int64_t H = c.hidden, I = c.intermediate;
    BertWeights bw;
    auto norm = [&](Norm& n, const std::string& p) {
        w.declare(n.w, p + ".weight", {H});
        w.declare(n.b, p + ".bias", {H});
    };
    w.declare(bw.word, pre + "embeddings.word_embeddings.weight", {c.vocab_size, H});
    w.declare(bw.pos, pre + "embeddings.position_embeddings.weight", {c.max_positions, H});
    w.declare(bw.type, pre + "embeddings.token_type_embeddings.weight", {c.type_vocab_size, H});
    norm(bw.emb_norm, pre + "embeddings.LayerNorm");
    bw.layers.resize(static_cast<size_t>(c.layers));
    for (int64_t i = 0; i < c.layers; ++i) {
        Layer& l = bw.layers[static_cast<size_t>(i)];
        const std::string b = pre + "encoder.layer." + std::to_string(i) + ".";
        layers::declare_linear(w, l.q, b + "attention.self.query", H, H);
        layers::declare_linear(w, l.k, b + "attention.self.key", H, H);
        layers::declare_linear(w, l.v, b + "attention.self.value", H, H);
        layers::declare_linear(w, l.o, b + "attention.output.dense", H, H);
        norm(l.attn_norm, b + "attention.output.LayerNorm");
        layers::declare_linear(w, l.up, b + "intermediate.dense", I, H);
        layers::declare_linear(w, l.down, b + "output.dense", H, I);
        norm(l.out_norm, b + "output.LayerNorm");
    }
    w.validate();
    if (c.max_seq_length > c.max_positions) {
        fail(Status::kModelFormat, dir + ": max_seq_length exceeds max_position_embeddings");
    }
    w.load_all();
    return std::make_unique<BertEmbedder>(options, config.json(), c, std::move(bw), std::move(tok), w.expected_elements());
}

}  // namespace cn::bert
