// The reference cases of a model's fixtures (tests/fixtures/<arch>/cases.json, written by
// scripts/make_<arch>_fixtures.py), parsed once per test binary. Needs CN_FIXTURES_DIR.
#pragma once

#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace cn::test {

inline const nlohmann::json& fixture_cases(const std::string& arch) {
    static std::map<std::string, nlohmann::json> parsed;
    auto it = parsed.find(arch);
    if (it == parsed.end()) {
        std::ifstream f(std::string(CN_FIXTURES_DIR) + "/" + arch + "/cases.json");
        it = parsed.emplace(arch, nlohmann::json::parse(f)).first;
    }
    return it->second;
}

}  // namespace cn::test
