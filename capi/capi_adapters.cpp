// LoRA adapters: loading one against a model, adding it to a generate request, the model's adapter state.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "capi/capi_internal.h"
#include "core/runtime/adapters.h"
#include "core/runtime/names.h"

using cn::Status;
using cn::capi::guarded;
using cn::capi::require;

struct cn_adapter {
    std::shared_ptr<const cn::Adapter> a;
};

namespace {
// The structs' sizes in ABI 0.5, which introduced them: fields appended later are read or written only when the
// caller's struct_size covers them.
constexpr uint64_t kAdapterParamsSize05 = offsetof(cn_adapter_params, max_file_bytes) + sizeof(uint64_t);
constexpr uint64_t kAdapterInfoSize05 = offsetof(cn_adapter_info, family) + sizeof(const char*);
constexpr uint64_t kAdapterStatsSize05 = offsetof(cn_adapter_stats, touched) + sizeof(uint64_t);
}  // namespace

extern "C" {

void cn_adapter_params_init(cn_adapter_params* params) {
    if (!params) return;
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
}

cn_status cn_adapter_load(cn_model* model, const char* path, const cn_adapter_params* params, cn_adapter** out, cn_error* err) {
    if (out) *out = nullptr;
    return guarded(err, [&] {
        require(model, "model");
        require(path, "path");
        require(out, "out");
        cn_adapter_params p;
        cn_adapter_params_init(&p);
        if (params) {
            if (params->struct_size < kAdapterParamsSize05) {
                cn::fail(Status::kInvalidArgument, "params: struct_size too small; initialise with cn_adapter_params_init");
            }
            // A caller built against an older header passes a shorter struct: read only what it holds.
            std::memcpy(static_cast<void*>(&p), params, static_cast<size_t>(std::min<uint64_t>(params->struct_size, sizeof p)));
            p.struct_size = sizeof p;
        }
        cn::AdapterHost* host = model->impl->adapter_host();
        if (!host) {
            cn::fail(Status::kUnsupported, std::string(cn::model_kind_name(model->impl->kind())) + " models take no adapters");
        }
        cn::AdapterLoadOptions o;
        if (p.allowed_dir) o.allowed_dir = p.allowed_dir;
        if (p.max_file_bytes) o.max_file_bytes = p.max_file_bytes;
        auto handle = std::make_unique<cn_adapter>();
        handle->a = cn::Adapter::load(path, o, host->targets(), model->impl->options().device, model->impl.get());
        *out = handle.release();
    });
}

void cn_adapter_free(cn_adapter* adapter) { delete adapter; }

void cn_adapter_info_init(cn_adapter_info* info) {
    if (!info) return;
    std::memset(info, 0, sizeof(*info));
    info->struct_size = sizeof(*info);
}

cn_status cn_adapter_get_info(const cn_adapter* adapter, cn_adapter_info* out, cn_error* err) {
    return guarded(err, [&] {
        require(adapter, "adapter");
        require(out, "out");
        cn_adapter_info full;
        cn_adapter_info_init(&full);
        full.n_targets = adapter->a->n_targets();
        full.n_patches = adapter->a->patches().size();
        full.max_rank = adapter->a->max_rank();
        full.factor_bytes = adapter->a->factor_bytes();
        full.family = adapter->a->family().c_str();
        cn::capi::write_prefix(out, full, kAdapterInfoSize05, "info", "cn_adapter_info_init");
    });
}

cn_status cn_generate_request_add_adapter(cn_generate_request* req, const cn_adapter* adapter, float scale, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        require(adapter, "adapter");
        if (!std::isfinite(scale)) cn::fail(Status::kInvalidArgument, "scale: must be finite");
        if (req->r.adapters.size() >= 64) cn::fail(Status::kInvalidArgument, "adapters: at most 64 per request");
        req->r.adapters.push_back({adapter->a, scale});
    });
}

cn_status cn_generate_request_clear_adapters(cn_generate_request* req, cn_error* err) {
    return guarded(err, [&] {
        require(req, "req");
        req->r.adapters.clear();
    });
}

void cn_adapter_stats_init(cn_adapter_stats* stats) {
    if (!stats) return;
    std::memset(stats, 0, sizeof(*stats));
    stats->struct_size = sizeof(*stats);
}

cn_status cn_model_get_adapter_stats(cn_model* model, cn_adapter_stats* out, cn_error* err) {
    return guarded(err, [&] {
        require(model, "model");
        require(out, "out");
        cn::AdapterHost* host = model->impl->adapter_host();
        if (!host) {
            cn::fail(Status::kUnsupported, std::string(cn::model_kind_name(model->impl->kind())) + " models take no adapters");
        }
        const cn::AdapterHost::Stats s = host->stats();
        cn_adapter_stats full;
        cn_adapter_stats_init(&full);
        full.switches = s.switches;
        full.switch_seconds = s.switch_seconds;
        full.backup_bytes = s.backup_bytes;
        full.touched = s.touched;
        cn::capi::write_prefix(out, full, kAdapterStatsSize05, "stats", "cn_adapter_stats_init");
    });
}

}  // extern "C"
