// Picks the architecture of a model directory and dispatches to its loader.
#include <fcntl.h>
#include <unistd.h>

#include "core/common/status.h"
#include "core/format/checkpoint.h"
#include "core/format/model_config.h"
#include "core/models/bert/bert_config.h"
#include "core/models/bert/bert_model.h"
#include "core/models/chronos2/chronos2_config.h"
#include "core/models/chronos2/chronos2_model.h"
#include "core/models/kronos/kronos_config.h"
#include "core/models/kronos/kronos_model.h"
#include "core/runtime/cpu_numerics.h"
#include "core/runtime/model.h"

namespace cn {
namespace {

bool has_file(const std::string& dir, const char* name) {
    return ::access((dir + "/" + name).c_str(), F_OK) == 0;
}

}  // namespace

std::unique_ptr<Model> load_model(const std::string& dir, const ModelOptions& options) {
    (void)runtime::cpu_numerics();  // MKL's reproducibility mode, before the model's first CPU computation
    ::close(format::open_directory(dir));  // a clear NOT_FOUND for a missing directory
    if (has_file(dir, "model_index.json")) {
        fail(Status::kUnsupported, dir + ": diffusion pipelines (model_index.json) are not supported by this build yet");
    }
    const format::ModelConfig config = format::ModelConfig::load(dir);
    if (chronos2::is_chronos2(config)) return chronos2::load_chronos2(dir, config, options);
    if (bert::is_bert(config)) return bert::load_bert(dir, config, options);
    if (has_file(dir, "modules.json")) {
        fail(Status::kUnsupported, dir + ": sentence-embedding models other than BERT encoders are not supported by this build yet");
    }
    if (kronos::is_kronos(config)) return kronos::load_kronos(dir, config, options);
    if (config.has("n_enc_layers") && config.has("s1_bits")) {
        fail(Status::kUnsupported, dir + ": a Kronos tokenizer alone; load the predictor's directory with the tokenizer in its "
                                         "tokenizer/ subdirectory");
    }
    fail(Status::kUnsupported, config.label() + ": unknown architecture (no 'architectures' entry this build knows)");
}

}  // namespace cn
