#include "core/format/model_config.h"

#include <cmath>

#include <fcntl.h>
#include <unistd.h>

#include "core/common/status.h"
#include "core/format/checkpoint.h"
#include "core/format/json_strict.h"
#include "core/format/mapped_file.h"

namespace cn::format {
namespace {

std::string describe(const nlohmann::json& v) {
    std::string s = v.dump();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

}  // namespace

ModelConfig ModelConfig::load(const std::string& dir, const std::string& name) {
    const int fd = open_directory(dir);
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    const std::string label = dir + "/" + name;
    return parse(read_small_file_at(fd, name, label, 16u * 1000u * 1000u), label);
}

ModelConfig ModelConfig::parse(std::string_view text, const std::string& label) {
    ModelConfig c;
    c.label_ = label;
    c.root_ = parse_json_strict(text, label, JsonLimits{16u * 1000u * 1000u, 32});
    if (!c.root_.is_object()) fail(Status::kModelFormat, label + ": not a JSON object");
    return c;
}

void ModelConfig::fail_field(std::string_view path, const std::string& what) const {
    fail(Status::kModelFormat, label_ + ": field '" + std::string(path) + "': " + what);
}

const nlohmann::json* ModelConfig::lookup(std::string_view path) const {
    const nlohmann::json* cur = &root_;
    while (true) {
        const size_t dot = path.find('.');
        const std::string key(path.substr(0, dot));
        if (!cur->is_object()) return nullptr;
        auto it = cur->find(key);
        if (it == cur->end() || it->is_null()) return nullptr;
        cur = &*it;
        if (dot == std::string_view::npos) return cur;
        path.remove_prefix(dot + 1);
    }
}

const nlohmann::json& ModelConfig::require(std::string_view path) const {
    const nlohmann::json* v = lookup(path);
    if (!v) fail_field(path, "missing");
    return *v;
}

int64_t ModelConfig::get_int(std::string_view path, int64_t lo, int64_t hi) const {
    const auto& v = require(path);
    if (!v.is_number_integer()) fail_field(path, "expected an integer, got " + describe(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        fail_field(path, "integer out of range");
    }
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
        fail_field(path, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x));
    }
    return x;
}

int64_t ModelConfig::get_int(std::string_view path, int64_t lo, int64_t hi, int64_t fallback) const {
    return has(path) ? get_int(path, lo, hi) : fallback;
}

double ModelConfig::get_double(std::string_view path, double lo, double hi) const {
    const auto& v = require(path);
    if (!v.is_number()) fail_field(path, "expected a number, got " + describe(v));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
        fail_field(path, "expected a number in [" + describe(lo) + ", " + describe(hi) + "], got " + describe(v));
    }
    return x;
}

double ModelConfig::get_double(std::string_view path, double lo, double hi, double fallback) const {
    return has(path) ? get_double(path, lo, hi) : fallback;
}

bool ModelConfig::get_bool(std::string_view path) const {
    const auto& v = require(path);
    if (!v.is_boolean()) fail_field(path, "expected true or false, got " + describe(v));
    return v.get<bool>();
}

bool ModelConfig::get_bool(std::string_view path, bool fallback) const { return has(path) ? get_bool(path) : fallback; }

std::string ModelConfig::get_string(std::string_view path) const {
    const auto& v = require(path);
    if (!v.is_string()) fail_field(path, "expected a string, got " + describe(v));
    return v.get<std::string>();
}

std::string ModelConfig::get_string(std::string_view path, const std::string& fallback) const {
    return has(path) ? get_string(path) : fallback;
}

std::vector<double> ModelConfig::get_double_array(std::string_view path, double lo, double hi, size_t min_len, size_t max_len) const {
    const auto& v = require(path);
    if (!v.is_array()) fail_field(path, "expected an array, got " + describe(v));
    if (v.size() < min_len || v.size() > max_len) {
        fail_field(path,
                   "expected " + std::to_string(min_len) + ".." + std::to_string(max_len) + " entries, got " + std::to_string(v.size()));
    }
    std::vector<double> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const auto& e = v[i];
        const std::string at = std::string(path) + "[" + std::to_string(i) + "]";
        if (!e.is_number()) fail_field(at, "expected a number, got " + describe(e));
        const double x = e.get<double>();
        if (!std::isfinite(x) || x < lo || x > hi) fail_field(at, "out of range: " + describe(e));
        out.push_back(x);
    }
    return out;
}

std::vector<std::string> ModelConfig::get_string_array(std::string_view path, size_t max_len) const {
    const auto& v = require(path);
    if (!v.is_array() || v.size() > max_len) fail_field(path, "expected an array of at most " + std::to_string(max_len) + " strings");
    std::vector<std::string> out;
    for (const auto& e : v) {
        if (!e.is_string()) fail_field(path, "expected strings, got " + describe(e));
        out.push_back(e.get<std::string>());
    }
    return out;
}

}  // namespace cn::format
