// Z-Image parity fixtures (scripts/make_zimage_fixtures.py): tiny pipelines in the diffusers layout under
// tests/fixtures/zimage/<config>/ (without the 16 MB tokenizer files), the reference's intermediates in
// tests/fixtures/zimage/reference/<config>.safetensors and the cases in tests/fixtures/zimage/cases.json.
// A complete pipeline directory is assembled in a temporary directory: the committed components linked, and
// tokenizer/ linking the real Qwen3 tokenizer files of CN_QWEN_TOKENIZER_DIR (scripts/env.sh:
// cn_qwen_tokenizer_dir). Without them the tests skip, unless CN_REQUIRE_QWEN_TOKENIZER=1 (scripts/test.sh).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <ftw.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace cn::test {

inline std::string qwen_tokenizer_dir() {
    const char* d = std::getenv("CN_QWEN_TOKENIZER_DIR");
    if (!d || !*d || !std::filesystem::exists(std::string(d) + "/tokenizer.json")) return {};
    return d;
}

inline bool require_qwen_tokenizer() {
    const char* r = std::getenv("CN_REQUIRE_QWEN_TOKENIZER");
    return r && std::string(r) == "1";
}

// Skips the test (or fails it when the tokenizer is required) when the real tokenizer files are absent.
#define CN_REQUIRE_ZIMAGE_TOKENIZER()                                                                               \
    do {                                                                                                            \
        if (cn::test::qwen_tokenizer_dir().empty()) {                                                               \
            if (cn::test::require_qwen_tokenizer()) FAIL() << "CN_QWEN_TOKENIZER_DIR does not hold tokenizer.json"; \
            GTEST_SKIP() << "SKIPPED: set CN_QWEN_TOKENIZER_DIR to the Qwen3 tokenizer files (scripts/env.sh)";     \
        }                                                                                                           \
    } while (0)

// Removes a directory tree without following links (nftw). Not std::filesystem::remove_all: in binaries linked
// with LibTorch that symbol can resolve to libtorch.so's own copy, which crashes (seen with torch 2.11.0).
inline void remove_tree(const std::string& path) {
    ::nftw(path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16, FTW_DEPTH | FTW_PHYS);
}

inline std::string zimage_fixtures() { return std::string(CN_FIXTURES_DIR) + "/zimage"; }

inline const nlohmann::json& zimage_cases() {
    static const nlohmann::json j = [] {
        std::ifstream f(zimage_fixtures() + "/cases.json");
        return nlohmann::json::parse(f);
    }();
    return j;
}

// The pipeline directory of fixture config `name`, assembled once per process under the system temp dir.
inline std::string zimage_pipeline_dir(const std::string& name) {
    namespace fs = std::filesystem;
    static std::map<std::string, std::string> made;
    // The directories are removed when the test process exits.
    static struct Cleanup {
        ~Cleanup() {
            for (const auto& [n, d] : made) remove_tree(d);
        }
    } cleanup;
    if (auto it = made.find(name); it != made.end()) return it->second;
    const fs::path src = fs::path(zimage_fixtures()) / name;
    const fs::path dst = fs::temp_directory_path() / ("cn_zimage_" + name + "_" + std::to_string(::getpid()));
    remove_tree(dst.string());
    fs::create_directories(dst / "tokenizer");
    for (const auto& e : fs::directory_iterator(src)) {
        if (e.path().filename() == "tokenizer") continue;
        fs::create_symlink(fs::absolute(e.path()), dst / e.path().filename());
    }
    if (fs::exists(src / "tokenizer")) {
        for (const auto& e : fs::directory_iterator(src / "tokenizer"))
            fs::create_symlink(fs::absolute(e.path()), dst / "tokenizer" / e.path().filename());
    }
    for (const auto& e : fs::directory_iterator(qwen_tokenizer_dir())) {
        if (!fs::exists(dst / "tokenizer" / e.path().filename())) {
            fs::create_symlink(fs::absolute(e.path()), dst / "tokenizer" / e.path().filename());
        }
    }
    made[name] = dst.string();
    return dst.string();
}

// One tensor's raw bytes from a safetensors file (std only, for tests that link just the public library): the
// 8-byte header length, the JSON header, then the data; `dtype` and `shape` receive the entry's.
inline std::vector<uint8_t> read_safetensor(const std::string& path, const std::string& name, std::string* dtype = nullptr,
                                            std::vector<int64_t>* shape = nullptr) {
    std::ifstream f(path, std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string header(n, '\0');
    f.read(header.data(), static_cast<std::streamsize>(n));
    const nlohmann::json h = nlohmann::json::parse(header);
    if (!h.contains(name)) return {};
    const auto& e = h.at(name);
    if (dtype) *dtype = e.at("dtype").get<std::string>();
    if (shape) *shape = e.at("shape").get<std::vector<int64_t>>();
    const auto off = e.at("data_offsets").get<std::vector<uint64_t>>();
    std::vector<uint8_t> data(off[1] - off[0]);
    f.seekg(static_cast<std::streamoff>(8 + n + off[0]));
    f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()));
    return data;
}

// The fixture case named `name` in cases.json.
inline const nlohmann::json& zimage_case(const std::string& name) {
    for (const auto& c : zimage_cases()["cases"]) {
        if (c["name"] == name) return c;
    }
    throw std::runtime_error("no Z-Image fixture case " + name);
}

}  // namespace cn::test
