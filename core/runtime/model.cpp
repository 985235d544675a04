#include "core/runtime/model.h"

#include "core/common/status.h"
#include "core/runtime/modes.h"
#include "core/runtime/names.h"

namespace cn {

void Model::fill_info(cn_model_info& info) const {
    info.kind = kind();
    info.device_type = options_.device.is_cuda() ? CN_DEVICE_CUDA : CN_DEVICE_CPU;
    info.device_index = options_.device.is_cuda() ? options_.device.index() : 0;
    info.dtype = options_.dtype == c10::kBFloat16 ? CN_DTYPE_BF16 : options_.dtype == c10::kHalf ? CN_DTYPE_F16 : CN_DTYPE_F32;
    info.mode = mode();
    info.n_parameters = n_parameters_;
    const MemoryUse mem = memory_use();
    info.weight_bytes = mem.weight_bytes;
    info.graph_pool_bytes = mem.graph_pool_bytes;
    info.workspace_bytes = mem.workspace_bytes;
}

nlohmann::json Model::describe() const {
    cn_model_info info{};
    info.struct_size = sizeof(info);
    fill_info(info);
    nlohmann::json j;
    j["kind"] = model_kind_name(kind());
    j["device"] = options_.device.str();
    j["dtype"] = dtype_name(static_cast<cn_dtype>(info.dtype));
    j["mode"] = mode_name(mode());
    j["n_parameters"] = info.n_parameters;
    j["memory"] = {
        {"weight_bytes", info.weight_bytes}, {"graph_pool_bytes", info.graph_pool_bytes}, {"workspace_bytes", info.workspace_bytes}};
    if (info.context_length) j["context_length"] = info.context_length;
    if (info.native_horizon) j["native_horizon"] = info.native_horizon;
    if (info.max_horizon) j["max_horizon"] = info.max_horizon;
    if (info.embedding_dim) j["embedding_dim"] = info.embedding_dim;
    j["config"] = config_;
    return j;
}

void Model::unsupported(const std::string& what) const {
    fail(Status::kUnsupported, std::string(model_kind_name(kind())) + " models cannot " + what);
}

std::vector<float> Model::quantiles() const { unsupported("report quantile levels"); }
ForecastShape Model::forecast_shape(const ForecastRequest&) const { unsupported("forecast"); }
void Model::forecast(const ForecastRequest&, RunContext&, float*, size_t, float*, size_t) { unsupported("forecast"); }
int64_t Model::embedding_dim() const { unsupported("embed"); }
void Model::embed(const std::vector<std::string>&, RunContext&, float*, size_t) { unsupported("embed"); }
size_t Model::generate_bytes(const GenerateRequest&) const { unsupported("generate images"); }
void Model::generate(const GenerateRequest&, RunContext&, uint8_t*, size_t) { unsupported("generate images"); }

void Model::apply_mode(cn_mode mode) {
    if (mode == CN_MODE_EAGER) return;
    fail(Status::kUnsupported, std::string("mode '") + mode_name(mode) + "' is not available for " + model_kind_name(kind()) +
                                   " models on " + options_.device.str() + " in this build");
}

void Model::set_mode(cn_mode mode) {
    if (!find_mode(static_cast<int64_t>(mode))) {
        fail(Status::kInvalidArgument, "mode: unknown value " + std::to_string(static_cast<int>(mode)) + " (" + mode_names() + ")");
    }
    std::unique_lock<std::mutex> lock(mode_mu_, std::try_to_lock);
    if (!lock.owns_lock() || active_calls_.load() > 0) {
        fail(Status::kBusy, "mode cannot change while a call is running on this model");
    }
    if (mode == mode_.load()) return;
    apply_mode(mode);
    mode_.store(mode);
}

Model::CallScope::CallScope(Model& m) : m_(m) {
    // Taking the mode mutex orders the call after any mode switch in progress.
    std::lock_guard<std::mutex> lock(m_.mode_mu_);
    m_.active_calls_.fetch_add(1);
}

Model::CallScope::~CallScope() { m_.active_calls_.fetch_sub(1); }

}  // namespace cn
