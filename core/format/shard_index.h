// model.safetensors.index.json: which shard file holds which tensor. LibTorch-free.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cn::format {

struct ShardIndex {
    std::vector<std::string> shards;                // distinct shard file names, sorted
    std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
};

inline constexpr size_t kMaxShards = 4096;

// True if `name` is a bare file name that stays inside its directory: not empty, no '/', no NUL, not "."
// or "..", no leading '.' component tricks. Used for every shard name read from an index.
bool is_safe_basename(std::string_view name);

// Parses and validates an index file's text. Throws cn::Error(kModelFormat) naming `label`: bad JSON,
// missing/ill-typed "weight_map", shard names that escape the directory, too many shards.
ShardIndex parse_shard_index(std::string_view text, std::string_view label);

}  // namespace cn::format
