#include "core/format/shard_index.h"

#include <set>

#include "core/common/status.h"
#include "core/format/json_strict.h"

namespace cn::format {

bool is_safe_basename(std::string_view name) {
    if (name.empty() || name.size() > 255) return false;
    if (name == "." || name == "..") return false;
    for (char c : name) {
        if (c == '/' || c == '\\' || c == '\0') return false;
    }
    return true;
}

ShardIndex parse_shard_index(std::string_view text, std::string_view label) {
    const std::string l(label);
    const nlohmann::json root = parse_json_strict(text, label, JsonLimits{64u * 1000u * 1000u, 16});
    if (!root.is_object()) fail(Status::kModelFormat, l + ": not a JSON object");
    auto wm = root.find("weight_map");
    if (wm == root.end() || !wm->is_object()) fail(Status::kModelFormat, l + ": missing or non-object \"weight_map\"");
    ShardIndex idx;
    std::set<std::string> shards;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
        if (!it->is_string()) fail(Status::kModelFormat, l + ": weight_map entry \"" + it.key() + "\" is not a string");
        const auto& shard = it->get_ref<const std::string&>();
        if (!is_safe_basename(shard)) {
            fail(Status::kModelFormat,
                 l + ": shard name \"" + shard + "\" of tensor \"" + it.key() + "\" is not a plain file name inside the model directory");
        }
        shards.insert(shard);
        if (shards.size() > kMaxShards) fail(Status::kModelFormat, l + ": more than " + std::to_string(kMaxShards) + " shards");
        idx.weight_map.emplace(it.key(), shard);
    }
    if (idx.weight_map.empty()) fail(Status::kModelFormat, l + ": empty weight_map");
    idx.shards.assign(shards.begin(), shards.end());
    return idx;
}

}  // namespace cn::format
