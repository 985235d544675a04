#include "core/runtime/modes.h"

#include <cstring>
#include <string>

namespace cn {

const std::vector<ModeInfo>& modes() {
    static const std::vector<ModeInfo> table = {
        {CN_MODE_EAGER, "eager", "the reference's ops in ATen; every device"},
        {CN_MODE_GRAPH, "graph", "CUDA graphs captured on first use and replayed; CUDA only"},
        {CN_MODE_FUSED, "fused", "cutenative's kernels (and, on CUDA, graphs where the architecture captures them)"},
    };
    return table;
}

const ModeInfo* find_mode(int64_t value) {
    for (const ModeInfo& m : modes()) {
        if (static_cast<int64_t>(m.mode) == value) return &m;
    }
    return nullptr;
}

const ModeInfo* find_mode(const char* name) {
    if (!name) return nullptr;
    for (const ModeInfo& m : modes()) {
        if (std::strcmp(name, m.name) == 0) return &m;
    }
    return nullptr;
}

const char* mode_names() {
    static const std::string s = [] {
        std::string out;
        const auto& t = modes();
        for (size_t i = 0; i < t.size(); ++i) out += (i == 0 ? "" : (i + 1 == t.size() ? " or " : ", ")) + std::string(t[i].name);
        return out;
    }();
    return s.c_str();
}

}  // namespace cn
