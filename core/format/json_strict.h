// Strict JSON for files we do not trust (safetensors headers, index files, config.json): RFC 8259 only
// (no comments, no NaN/Infinity, no trailing commas), duplicate object keys rejected, nesting depth and
// input size capped. LibTorch-free.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cn::format {

struct JsonLimits {
    size_t max_bytes = 100u * 1000u * 1000u;  // the safetensors MAX_HEADER_SIZE
    size_t max_depth = 64;
};

// Parses `text`. On failure throws cn::Error(kModelFormat) whose message starts with `what` (a file
// name) and says what is wrong and where (byte offset).
nlohmann::json parse_json_strict(std::string_view text, std::string_view what, const JsonLimits& limits = {});

}  // namespace cn::format
