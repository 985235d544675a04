// The real Z-Image Turbo layout, shapes only: tests/fixtures/zimage/full_size.json (scripts/make_zimage_fixtures.py)
// lists the real configs (the HF repo's own config formats where they differ from what the reference classes save)
// and every tensor's name, shape and storage dtype from the reference classes instantiated at full size. The test
// writes that directory with sparse safetensors files (headers plus holes: no disk space, no data) in the HF
// sharding, and checks that cutenative parses every config and validates every weight list against it
// (check_zimage_directory: what cn_model_create checks before loading anything). A renamed or mis-shaped tensor
// must fail with the component and tensor named.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/models/zimage/zimage_model.h"
#include "tests/models/zimage/zimage_fixture.h"

namespace {

namespace fs = std::filesystem;

size_t dtype_size(const std::string& d) { return d == "F32" ? 4 : d == "BF16" || d == "F16" ? 2 : 8; }

// Writes `tensors` (name, shape, dtype) as `shards` sparse safetensors files `<stem>-0000i-of-0000n.safetensors`
// plus `<stem>.safetensors.index.json` (or one `<stem>.safetensors` when shards == 1).
void write_sparse(const fs::path& dir, const std::string& stem, const nlohmann::json& tensors, int shards) {
    fs::create_directories(dir);
    nlohmann::json weight_map = nlohmann::json::object();
    const size_t per = (tensors.size() + static_cast<size_t>(shards) - 1) / static_cast<size_t>(shards);
    for (int s = 0; s < shards; ++s) {
        char name[128];
        if (shards == 1) {
            std::snprintf(name, sizeof(name), "%s.safetensors", stem.c_str());
        } else {
            std::snprintf(name, sizeof(name), "%s-%05d-of-%05d.safetensors", stem.c_str(), s + 1, shards);
        }
        nlohmann::json header = nlohmann::json::object();
        uint64_t off = 0;
        for (size_t i = static_cast<size_t>(s) * per; i < std::min(tensors.size(), (static_cast<size_t>(s) + 1) * per); ++i) {
            const auto& t = tensors[i];
            uint64_t n = dtype_size(t["dtype"]);
            for (int64_t d : t["shape"].get<std::vector<int64_t>>()) n *= static_cast<uint64_t>(d);
            header[t["name"].get<std::string>()] = {{"dtype", t["dtype"]}, {"shape", t["shape"]}, {"data_offsets", {off, off + n}}};
            weight_map[t["name"].get<std::string>()] = name;
            off += n;
        }
        std::string h = header.dump();
        h.append((8 - h.size() % 8) % 8, ' ');
        const uint64_t hlen = h.size();
        std::ofstream f(dir / name, std::ios::binary);
        f.write(reinterpret_cast<const char*>(&hlen), 8);
        f.write(h.data(), static_cast<std::streamsize>(h.size()));
        f.close();
        fs::resize_file(dir / name, 8 + hlen + off);  // the data: a hole
    }
    if (shards > 1) {
        std::ofstream(dir / (stem + ".safetensors.index.json"))
            << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump();
    }
}

class ZImageFullSize : public ::testing::Test {
protected:
    void SetUp() override {
        CN_REQUIRE_ZIMAGE_TOKENIZER();
        std::ifstream f(cn::test::zimage_fixtures() + "/full_size.json");
        spec_ = nlohmann::json::parse(f);
        dir_ = fs::temp_directory_path() / ("cn_zimage_full_" + std::to_string(::getpid()));
        cn::test::remove_tree(dir_.string());
        fs::create_directories(dir_);
        std::ofstream(dir_ / "model_index.json") << spec_["model_index"].dump();
        fs::create_directories(dir_ / "scheduler");
        std::ofstream(dir_ / "scheduler" / "scheduler_config.json") << spec_["scheduler"]["config_hf_format"].dump();
        for (const char* c : {"transformer", "vae"}) {
            fs::create_directories(dir_ / c);
            std::ofstream(dir_ / c / "config.json") << spec_[c]["config"].dump();
        }
        fs::create_directories(dir_ / "text_encoder");
        std::ofstream(dir_ / "text_encoder" / "config.json") << spec_["text_encoder"]["config_hf_format"].dump();
        fs::create_directories(dir_ / "tokenizer");
        for (const auto& e : fs::directory_iterator(cn::test::qwen_tokenizer_dir()))
            fs::create_symlink(e.path(), dir_ / "tokenizer" / e.path().filename());
    }
    void TearDown() override {
        if (!dir_.empty()) cn::test::remove_tree(dir_.string());
    }
    void write_weights(const std::function<void(nlohmann::json&, nlohmann::json&, nlohmann::json&)>& edit = nullptr) {
        nlohmann::json tr = spec_["transformer"]["tensors"], te = spec_["text_encoder"]["tensors"], va = spec_["vae"]["tensors"];
        if (edit) edit(tr, te, va);
        write_sparse(dir_ / "transformer", "diffusion_pytorch_model", tr, 3);
        write_sparse(dir_ / "text_encoder", "model", te, 3);
        write_sparse(dir_ / "vae", "diffusion_pytorch_model", va, 1);
    }
    nlohmann::json spec_;
    fs::path dir_;
};

TEST_F(ZImageFullSize, RealConfigsAndWeightListsValidate) {
    EXPECT_EQ(spec_["transformer"]["tensors"].size(), 521u);
    write_weights();
    EXPECT_NO_THROW(cn::zimage::check_zimage_directory(dir_.string()));
}

TEST_F(ZImageFullSize, AMissingOrMisShapedTensorIsNamed) {
    write_weights([](nlohmann::json& tr, nlohmann::json&, nlohmann::json&) {
        for (auto& t : tr) {
            if (t["name"] == "layers.29.attention.to_k.weight") t["shape"] = {3840, 3839};
        }
    });
    try {
        cn::zimage::check_zimage_directory(dir_.string());
        FAIL() << "a mis-shaped tensor was accepted";
    } catch (const cn::Error& e) {
        EXPECT_EQ(e.status(), cn::Status::kModelFormat);
        EXPECT_NE(std::string(e.what()).find("transformer"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("layers.29.attention.to_k.weight"), std::string::npos) << e.what();
    }
    write_weights([](nlohmann::json&, nlohmann::json& te, nlohmann::json&) {
        nlohmann::json kept = nlohmann::json::array();
        for (auto& t : te) {
            if (t["name"] != "model.layers.3.mlp.up_proj.weight") kept.push_back(t);
        }
        te = kept;
    });
    try {
        cn::zimage::check_zimage_directory(dir_.string());
        FAIL() << "a missing tensor was accepted";
    } catch (const cn::Error& e) {
        EXPECT_EQ(e.status(), cn::Status::kModelFormat);
        EXPECT_NE(std::string(e.what()).find("text_encoder"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("model.layers.3.mlp.up_proj.weight"), std::string::npos) << e.what();
    }
}

}  // namespace
