// config.json with typed, range-checked accessors whose errors name the file and the field.
// Paths use dots for nesting: "chronos_config.quantiles". LibTorch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace cn::format {

class ModelConfig {
public:
    // Reads and parses `<dir>/<name>` (strict JSON, at most 16 MB). Throws kNotFound / kModelFormat.
    static ModelConfig load(const std::string& dir, const std::string& name = "config.json");
    // Parses text; `label` names the source in messages. Throws kModelFormat.
    static ModelConfig parse(std::string_view text, const std::string& label);

    const std::string& label() const { return label_; }
    const nlohmann::json& json() const { return root_; }

    bool has(std::string_view path) const { return lookup(path) != nullptr; }

    // Integers: the value must be a JSON integer (not 3.0) within [lo, hi].
    int64_t get_int(std::string_view path, int64_t lo, int64_t hi) const;
    int64_t get_int(std::string_view path, int64_t lo, int64_t hi, int64_t fallback) const;
    // Numbers (integers accepted), finite, within [lo, hi].
    double get_double(std::string_view path, double lo, double hi) const;
    double get_double(std::string_view path, double lo, double hi, double fallback) const;
    bool get_bool(std::string_view path) const;
    bool get_bool(std::string_view path, bool fallback) const;
    std::string get_string(std::string_view path) const;
    std::string get_string(std::string_view path, const std::string& fallback) const;
    // Arrays of numbers within [lo, hi], length within [min_len, max_len].
    std::vector<double> get_double_array(std::string_view path, double lo, double hi, size_t min_len, size_t max_len) const;
    std::vector<std::string> get_string_array(std::string_view path, size_t max_len) const;

    // Throws kModelFormat "<file>: field '<path>': <what>".
    [[noreturn]] void fail_field(std::string_view path, const std::string& what) const;

private:
    const nlohmann::json* lookup(std::string_view path) const;
    const nlohmann::json& require(std::string_view path) const;

    std::string label_;
    nlohmann::json root_;
};

}  // namespace cn::format
