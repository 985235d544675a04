// libFuzzer target over the LoRA key planner (core/format/lora_keys.h) against a small Z-Image-shaped model. The input
// is text, one tensor a line: "<name> <dtype> <dims, comma-separated> [<alpha value>]" (dtype: h F16, b BF16, f F32,
// d F64, i I64, 8 F8_E4M3), or "@<JSON>" for the lora_adapter_metadata string. A cn::Error is the expected answer to
// bad input; anything else escaping (another exception, a crash, a sanitizer report) is a bug, and so is a plan that
// breaks a promise of the header (a patch outside its target or its up matrix, a factor shape that does not fit, a
// non-finite scale, patches out of order or overlapping).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"
#include "core/format/lora_keys.h"

namespace {

using cn::format::DType;
using cn::format::LoraTargetInfo;
using cn::format::LoraTensorInfo;

const std::vector<LoraTargetInfo>& targets() {
    static const std::vector<LoraTargetInfo> t = [] {
        const int64_t D = 8, F = 16, A = 8;
        std::vector<LoraTargetInfo> v = {
            {"all_x_embedder.2-1.weight", D, 64},         {"all_final_layer.2-1.adaLN_modulation.1.weight", D, A},
            {"all_final_layer.2-1.linear.weight", 64, D}, {"t_embedder.mlp.0.weight", 32, 16},
            {"t_embedder.mlp.2.weight", A, 32},           {"cap_embedder.1.weight", D, 12}};
        for (const std::string p : {"noise_refiner.0.", "context_refiner.0.", "layers.0.", "layers.1."}) {
            for (const char* n : {"attention.to_q", "attention.to_k", "attention.to_v", "attention.to_out.0"})
                v.push_back({p + n + ".weight", D, D});
            v.push_back({p + "feed_forward.w1.weight", F, D});
            v.push_back({p + "feed_forward.w2.weight", D, F});
            v.push_back({p + "feed_forward.w3.weight", F, D});
            if (p != "context_refiner.0.") v.push_back({p + "adaLN_modulation.0.weight", 4 * D, A});
        }
        // A model that keeps the original fused qkv, next to the split ones.
        v.push_back({"layers.2.attention.qkv.weight", 3 * D, D});
        return v;
    }();
    return t;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    for (size_t pos = 0;;) {
        const size_t at = s.find(sep, pos);
        out.push_back(s.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos));
        if (at == std::string_view::npos) return out;
        pos = at + 1;
    }
}

int64_t small_int(std::string_view s) {
    int64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
        if (v > 100000) return v;
    }
    return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::vector<LoraTensorInfo> tensors;
    std::map<std::string, std::string> metadata;
    for (std::string_view line : split(text, '\n')) {
        if (line.empty()) continue;
        if (line[0] == '@') {
            metadata["lora_adapter_metadata"] = std::string(line.substr(1));
            continue;
        }
        const auto f = split(line, ' ');
        LoraTensorInfo t;
        t.name = std::string(f[0]);
        if (f.size() > 1 && !f[1].empty()) {
            switch (f[1][0]) {
                case 'h': t.dtype = DType::kF16; break;
                case 'b': t.dtype = DType::kBF16; break;
                case 'd': t.dtype = DType::kF64; break;
                case 'i': t.dtype = DType::kI64; break;
                case '8': t.dtype = DType::kF8E4M3; break;
                default: t.dtype = DType::kF32; break;
            }
        }
        if (f.size() > 2 && !f[2].empty()) {
            for (std::string_view d : split(f[2], ',')) t.shape.push_back(small_int(d));
        }
        if (f.size() > 3) t.scalar = f[3] == "nan" ? std::nan("") : static_cast<double>(small_int(f[3]));
        tensors.push_back(std::move(t));
    }
    try {
        const auto plan = cn::format::plan_lora(tensors, metadata, targets(), "fuzz");
        if (plan.patches.empty() || plan.family.empty()) std::abort();
        std::map<std::string, const LoraTargetInfo*> by_name;
        for (const auto& t : targets()) by_name[t.name] = &t;
        std::map<std::string, const LoraTensorInfo*> by_tensor;
        for (const auto& t : tensors) by_tensor[t.name] = &t;
        for (size_t i = 0; i < plan.patches.size(); ++i) {
            const auto& p = plan.patches[i];
            auto t = by_name.find(p.target);
            auto down = by_tensor.find(p.down), up = by_tensor.find(p.up);
            if (t == by_name.end() || down == by_tensor.end() || up == by_tensor.end()) std::abort();
            if (p.rank <= 0 || p.rows <= 0 || p.row_begin < 0 || p.row_begin + p.rows > t->second->out || !std::isfinite(p.scale))
                std::abort();
            if (down->second->shape != std::vector<int64_t>{p.rank, t->second->in}) std::abort();
            const auto& us = up->second->shape;
            if (us.size() != 2 || us[1] != p.rank || p.up_row_begin < 0 || p.up_row_begin + p.rows > us[0]) std::abort();
            if (i > 0) {
                const auto& q = plan.patches[i - 1];
                if (q.target > p.target || (q.target == p.target && q.row_begin + q.rows > p.row_begin)) std::abort();
            }
        }
    } catch (const cn::Error&) {
        // the expected answer to a bad adapter
    }
    return 0;
}
