// The architecture table and the loader that walks it.
#include "core/models/registry.h"

#include <fcntl.h>
#include <unistd.h>

#include "core/common/status.h"
#include "core/format/checkpoint.h"
#include "core/models/bert/bert_config.h"
#include "core/models/bert/bert_model.h"
#include "core/models/chronos2/chronos2_config.h"
#include "core/models/chronos2/chronos2_model.h"
#include "core/models/kronos/kronos_config.h"
#include "core/models/kronos/kronos_model.h"
#include "core/models/toto/toto_config.h"
#include "core/models/toto/toto_model.h"
#include "core/models/zimage/zimage_config.h"
#include "core/models/zimage/zimage_model.h"
#include "core/runtime/cpu_numerics.h"

namespace cn::models {
namespace {

bool has_file(const std::string& dir, const char* name) { return ::access((dir + "/" + name).c_str(), F_OK) == 0; }

std::string embedding_near_miss(const std::string& dir, const format::ModelConfig&) {
    if (!has_file(dir, "modules.json")) return {};
    return dir + ": sentence-embedding models other than BERT encoders are not supported by this build yet";
}

std::string kronos_near_miss(const std::string& dir, const format::ModelConfig& config) {
    if (!(config.has("n_enc_layers") && config.has("s1_bits"))) return {};
    return dir +
           ": a Kronos tokenizer alone; load the predictor's directory with the tokenizer in its tokenizer/ "
           "subdirectory";
}

}  // namespace

const std::vector<Architecture>& architectures() {
    static const std::vector<Architecture> table = {
        {"chronos2", chronos2::is_chronos2, chronos2::load_chronos2},
        {"bert", bert::is_bert, bert::load_bert, embedding_near_miss},
        {"kronos", kronos::is_kronos, kronos::load_kronos, kronos_near_miss},
        {"toto", toto::is_toto, toto::load_toto},
    };
    return table;
}

}  // namespace cn::models

namespace cn {

std::unique_ptr<Model> load_model(const std::string& dir, const ModelOptions& options) {
    (void)runtime::cpu_numerics();         // MKL's reproducibility mode, before the model's first CPU computation
    ::close(format::open_directory(dir));  // a clear NOT_FOUND for a missing directory
    // A diffusers pipeline directory (model_index.json, one subdirectory per component): Z-Image is the one this
    // build loads (parse_zimage_config names any other pipeline class as unsupported).
    if (zimage::is_pipeline_dir(dir)) return zimage::load_zimage(dir, options);
    if (options.offload_text_encoder) {
        fail(Status::kInvalidArgument, "params.offload: CN_OFFLOAD_TEXT_ENCODER applies to image models; " + dir + " is not one");
    }
    const format::ModelConfig config = format::ModelConfig::load(dir);
    for (const models::Architecture& a : models::architectures()) {
        if (a.recognise(config)) return a.load(dir, config, options);
        if (a.near_miss) {
            if (std::string why = a.near_miss(dir, config); !why.empty()) fail(Status::kUnsupported, why);
        }
    }
    std::string known;
    for (const models::Architecture& a : models::architectures()) known += (known.empty() ? "" : ", ") + std::string(a.name);
    fail(Status::kUnsupported,
         config.label() + ": unknown architecture (no 'architectures' entry this build knows; it loads " + known + ")");
}

}  // namespace cn
