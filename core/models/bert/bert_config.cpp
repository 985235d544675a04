#include "core/models/bert/bert_config.h"

#include <unistd.h>

#include "core/common/status.h"
#include "core/format/checkpoint.h"
#include "core/format/json_strict.h"
#include "core/format/mapped_file.h"

namespace cn::bert {
namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

nlohmann::json load_json(const std::string& dir, const std::string& name) {
    const int fd = format::open_directory(dir);
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    const std::string label = dir + "/" + name;
    return format::parse_json_strict(format::read_small_file_at(fd, name, label, 1u << 20), label, format::JsonLimits{1u << 20, 16});
}

}  // namespace

bool is_bert(const format::ModelConfig& cfg) {
    if (cfg.get_string("model_type", "") == "bert") return true;
    if (!cfg.has("architectures")) return false;
    for (const auto& a : cfg.get_string_array("architectures", 16)) {
        if (a == "BertModel") return true;
    }
    return false;
}

BertConfig parse_bert_config(const format::ModelConfig& cfg, const std::string& dir) {
    BertConfig c;
    c.hidden = cfg.get_int("hidden_size", 1, 65536);
    c.layers = cfg.get_int("num_hidden_layers", 1, 1024);
    c.heads = cfg.get_int("num_attention_heads", 1, 1024);
    c.intermediate = cfg.get_int("intermediate_size", 1, 1 << 20);
    c.vocab_size = cfg.get_int("vocab_size", 1, 1 << 24);
    c.max_positions = cfg.get_int("max_position_embeddings", 1, 1 << 20);
    c.type_vocab_size = cfg.get_int("type_vocab_size", 1, 1024, 2);
    c.layer_norm_eps = cfg.get_double("layer_norm_eps", 0.0, 1.0, 1e-12);
    if (c.hidden % c.heads != 0) {
        fail(Status::kModelFormat, cfg.label() + ": hidden_size " + std::to_string(c.hidden) +
                                       " is not a multiple of num_attention_heads " + std::to_string(c.heads));
    }
    const std::string act = cfg.get_string("hidden_act", "gelu");
    if (act != "gelu") fail(Status::kUnsupported, cfg.label() + ": hidden_act '" + act + "' (only exact 'gelu' is supported)");
    const std::string pos = cfg.get_string("position_embedding_type", "absolute");
    if (pos != "absolute") fail(Status::kUnsupported, cfg.label() + ": position_embedding_type '" + pos + "' (only 'absolute')");

    // modules.json: Transformer, Pooling, then optionally Normalize (embeddings are always L2-normalised).
    const std::string modules = dir + "/modules.json";
    std::string pooling_dir = "1_Pooling";
    if (exists(modules)) {
        const nlohmann::json mj = load_json(dir, "modules.json");
        const std::string label = dir + "/modules.json";
        if (!mj.is_array() || mj.size() < 2 || mj.size() > 3) {
            fail(Status::kUnsupported, label + ": expected Transformer, Pooling and optionally Normalize modules");
        }
        const char* want[] = {"sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
                              "sentence_transformers.models.Normalize"};
        for (size_t i = 0; i < mj.size(); ++i) {
            const auto& e = mj[i];
            const std::string type = e.is_object() && e.contains("type") && e["type"].is_string() ? e["type"].get<std::string>() : "";
            if (type != want[i]) {
                fail(Status::kUnsupported, label + ": module " + std::to_string(i) + " is '" + type + "', expected '" + want[i] + "'");
            }
            if (i == 1 && e.contains("path") && e["path"].is_string()) pooling_dir = e["path"].get<std::string>();
        }
        if (pooling_dir.empty() || pooling_dir.find("..") != std::string::npos || pooling_dir.find('/') != std::string::npos) {
            fail(Status::kModelFormat, label + ": module 1 has a bad path '" + pooling_dir + "'");
        }
    }
    if (exists(dir + "/" + pooling_dir + "/config.json")) {
        const auto p = format::ModelConfig::load(dir + "/" + pooling_dir);
        const bool mean = p.get_bool("pooling_mode_mean_tokens", false), cls = p.get_bool("pooling_mode_cls_token", false);
        const bool other = p.get_bool("pooling_mode_max_tokens", false) || p.get_bool("pooling_mode_mean_sqrt_len_tokens", false) ||
                           p.get_bool("pooling_mode_weightedmean_tokens", false) || p.get_bool("pooling_mode_lasttoken", false);
        if (mean == cls || other) fail(Status::kUnsupported, p.label() + ": only mean or CLS pooling (exactly one) is supported");
        c.pooling = mean ? Pooling::kMean : Pooling::kCls;
        const int64_t dim = p.get_int("word_embedding_dimension", 1, 65536, c.hidden);
        if (dim != c.hidden) fail(Status::kModelFormat, p.label() + ": word_embedding_dimension differs from hidden_size");
    }
    c.max_seq_length = std::min<int64_t>(512, c.max_positions);
    if (exists(dir + "/sentence_bert_config.json")) {
        const auto s = format::ModelConfig::load(dir, "sentence_bert_config.json");
        c.max_seq_length = s.get_int("max_seq_length", 2, c.max_positions, c.max_seq_length);
    }
    if (exists(dir + "/tokenizer_config.json")) {
        const auto t = format::ModelConfig::load(dir, "tokenizer_config.json");
        c.lowercase = t.get_bool("do_lower_case", true);
        c.handle_cjk = t.get_bool("tokenize_chinese_chars", true);
        if (t.has("strip_accents")) c.strip_accents = t.get_bool("strip_accents");  // null: follows lower-casing
    }
    if (!exists(dir + "/vocab.txt")) fail(Status::kModelFormat, dir + ": vocab.txt is missing (the WordPiece vocabulary)");
    return c;
}

}  // namespace cn::bert
