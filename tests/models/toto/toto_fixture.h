// The Toto fixtures (tests/fixtures/toto, scripts/make_toto_fixtures.py): cases.json and the arrays of
// cases.safetensors, std only (the C ABI tests link just the public library).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cn::test {

inline std::string toto_dir() { return std::string(CN_FIXTURES_DIR) + "/toto"; }

inline const nlohmann::json& toto_cases() {
    static const nlohmann::json j = [] {
        std::ifstream f(toto_dir() + "/cases.json");
        return nlohmann::json::parse(f);
    }();
    return j;
}

inline const nlohmann::json& toto_case(const std::string& name) {
    for (const auto& c : toto_cases()["cases"]) {
        if (c["name"] == name) return c;
    }
    throw std::runtime_error("no Toto fixture case " + name);
}

// One array's raw bytes, its dtype ("F32", "U8", ...) and shape.
inline std::vector<uint8_t> toto_array(const std::string& name, std::string* dtype, std::vector<int64_t>* shape) {
    std::ifstream f(toto_dir() + "/cases.safetensors", std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string header(n, '\0');
    f.read(header.data(), static_cast<std::streamsize>(n));
    const nlohmann::json h = nlohmann::json::parse(header);
    if (!h.contains(name)) throw std::runtime_error("no Toto fixture array " + name);
    const auto& e = h.at(name);
    *dtype = e.at("dtype").get<std::string>();
    *shape = e.at("shape").get<std::vector<int64_t>>();
    const auto off = e.at("data_offsets").get<std::vector<uint64_t>>();
    std::vector<uint8_t> data(off[1] - off[0]);
    f.seekg(static_cast<std::streamoff>(8 + n + off[0]));
    f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()));
    return data;
}

// A float32 array.
inline std::vector<float> toto_floats(const std::string& name, std::vector<int64_t>* shape) {
    std::string dtype;
    const std::vector<uint8_t> b = toto_array(name, &dtype, shape);
    if (dtype != "F32") throw std::runtime_error(name + " is " + dtype + ", not F32");
    std::vector<float> v(b.size() / sizeof(float));
    std::memcpy(v.data(), b.data(), b.size());
    return v;
}

}  // namespace cn::test
