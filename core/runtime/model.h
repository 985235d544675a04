// The model interface every architecture implements (load_model, which picks the architecture of a directory,
// is core/models/registry.h). LibTorch types stay out of this header (only c10 device/dtype), so the C ABI glue and
// the tests compile it cheaply.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include "capi/include/cutenative.h"
#include "core/runtime/requests.h"
#include "core/runtime/run_context.h"

namespace cn {

class AdapterHost;  // core/runtime/adapters.h

struct ModelOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    cn_mode mode = CN_MODE_EAGER;
    bool check_tensors = false;
    bool mmap_weights = false;
    bool offload_text_encoder = false;  // image models: the text encoder on the CPU (CN_OFFLOAD_TEXT_ENCODER)
};

struct MemoryUse {
    uint64_t weight_bytes = 0;
    uint64_t graph_pool_bytes = 0;
    uint64_t workspace_bytes = 0;
};

class Model {
public:
    virtual ~Model() = default;

    virtual cn_model_kind kind() const = 0;
    const ModelOptions& options() const { return options_; }
    cn_mode mode() const { return mode_.load(); }

    // Common facts plus the architecture's (context length, horizon, ...).
    virtual void fill_info(cn_model_info& info) const;
    // Kind, device, dtype, mode, memory and the config values.
    virtual nlohmann::json describe() const;

    // Capabilities; the defaults throw kUnsupported naming the kind.
    virtual std::vector<float> quantiles() const;
    virtual ForecastShape forecast_shape(const ForecastRequest& req) const;
    virtual void forecast(const ForecastRequest& req, RunContext& run, float* out, size_t out_count, float* samples, size_t samples_count);
    virtual int64_t embedding_dim() const;
    virtual void embed(const std::vector<std::string>& texts, RunContext& run, float* out, size_t out_count);
    virtual size_t generate_bytes(const GenerateRequest& req) const;  // bytes of the RGB8 image
    virtual void generate(const GenerateRequest& req, RunContext& run, uint8_t* out, size_t out_bytes);
    // The weights LoRA adapters may patch and their state (adapters.h); nullptr for kinds that take none.
    virtual AdapterHost* adapter_host() { return nullptr; }

    // Mode switching: kBusy while any call is in flight (see CallScope), kUnsupported when the mode is not
    // available on this model/device.
    void set_mode(cn_mode mode);

    // Marks a call in flight for its lifetime; blocks set_mode (which then answers kBusy).
    class CallScope {
    public:
        explicit CallScope(Model& m);
        ~CallScope();
        CallScope(const CallScope&) = delete;
        CallScope& operator=(const CallScope&) = delete;

    private:
        Model& m_;
    };

protected:
    Model(ModelOptions options, nlohmann::json config) : options_(options), config_(std::move(config)) { mode_.store(CN_MODE_EAGER); }
    // Applies a mode; called with no call in flight. The default accepts EAGER only; FUSED and GRAPH are
    // rejected with kUnsupported until an architecture provides them.
    virtual void apply_mode(cn_mode mode);
    [[noreturn]] void unsupported(const std::string& what) const;
    virtual MemoryUse memory_use() const { return {weight_bytes_, 0, 0}; }

    ModelOptions options_;
    nlohmann::json config_;
    uint64_t n_parameters_ = 0;
    uint64_t weight_bytes_ = 0;

private:
    std::mutex mode_mu_;
    std::atomic<int> active_calls_{0};
    std::atomic<cn_mode> mode_;
};

}  // namespace cn
