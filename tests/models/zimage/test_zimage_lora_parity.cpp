// LoRA parity on the tiny Z-Image pipelines with the adapters of every published key family
// (tests/fixtures/zimage/lora/, scripts/make_zimage_lora_fixtures.py): files made by the reference tools (diffusers /
// PEFT save_lora_weights) where they exist, hand-written in the real layout where not. For each case:
//   - the plan (core/format/lora_keys.h) resolves every module to the targets, row slices and scales the reference
//     recorded (cases.json);
//   - the fused fp32 weights equal fp32(fp64(W0) + sum of the deltas in fp64) within 2e-6 relative (an fp32 GEMM
//     against an fp64 sum; 1e-6 is PEFT's own fuse against it);
//   - the image equals the reference's RGB8 within 1 level on >= 99.9 % of values, as test_zimage_capi.cpp's cases:
//     diffusers' unfused run-time branch where diffusers 0.42.1 handles the family, the pipeline with the expected
//     fused weights where it does not (spec: ../shared/specs/zimage.md §5.5);
// and each refusal file is refused with the status and the key the reference recorded.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/from_blob.h>
#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/models/registry.h"
#include "core/runtime/adapters.h"
#include "core/runtime/model.h"
#include "core/runtime/run_context.h"
#include "tests/models/zimage/zimage_fixture.h"

namespace {

std::string lora_dir() { return cn::test::zimage_fixtures() + "/lora"; }

const nlohmann::json& lora_cases() {
    static const nlohmann::json j = [] {
        std::ifstream f(lora_dir() + "/cases.json");
        return nlohmann::json::parse(f);
    }();
    return j;
}

cn::Model& model(const std::string& config) {
    static std::map<std::string, std::unique_ptr<cn::Model>> models;
    auto it = models.find(config);
    if (it == models.end()) it = models.emplace(config, cn::load_model(cn::test::zimage_pipeline_dir(config), cn::ModelOptions{})).first;
    return *it->second;
}

// An F32 / U8 tensor of the reference file, on the CPU.
at::Tensor reference(const std::string& name) {
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes = cn::test::read_safetensor(lora_dir() + "/reference.safetensors", name, &dtype, &shape);
    EXPECT_FALSE(bytes.empty()) << name;
    const auto st = dtype == "U8" ? at::kByte : at::kFloat;
    return at::from_blob(bytes.data(), shape, at::TensorOptions().dtype(st)).clone();
}

class ZImageLoraParity : public ::testing::Test {
protected:
    void SetUp() override { CN_REQUIRE_ZIMAGE_TOKENIZER(); }
};

TEST_F(ZImageLoraParity, EveryFamilyMatchesTheReference) {
    for (const auto& c : lora_cases()["cases"]) {
        const std::string name = c["name"];
        SCOPED_TRACE(name + " (" + c["reference_path"].get<std::string>() + ")");
        cn::Model& m = model(c["config"]);
        cn::AdapterHost& host = *m.adapter_host();
        cn::GenerateRequest req;
        req.prompt = c["prompt"].get<std::string>();
        if (!c["negative_prompt"].is_null()) req.negative_prompt = c["negative_prompt"].get<std::string>();
        req.width = c["width"];
        req.height = c["height"];
        req.steps = c["steps"];
        req.guidance = c["guidance"].get<float>();
        req.cfg_truncation = c["cfg_truncation"].get<double>();
        const auto& n = c["cfg_normalization"];
        req.cfg_normalization = n.is_boolean() ? (n.get<bool>() ? 1.0 : 0.0) : n.get<double>();
        for (const auto& a : c["adapters"]) {
            auto adapter = cn::Adapter::load(lora_dir() + "/" + a["file"].get<std::string>(), {}, host.targets(), m.options().device, &m);
            // The plan: every module's targets, row slices and scale as the reference read the file.
            std::map<std::pair<std::string, int64_t>, const cn::Adapter::Patch*> patches;
            for (const auto& p : adapter->patches()) patches[{p.target, p.row_begin}] = &p;
            size_t expected = 0;
            for (const auto& mod : a["modules"]) {
                int64_t row = 0;
                for (const auto& t : mod["targets"]) {
                    ++expected;
                    const std::string target = t["weight"];
                    const int64_t rows = t["up_rows"][1].get<int64_t>() - t["up_rows"][0].get<int64_t>();
                    const auto it = patches.find({target, 0});
                    ASSERT_NE(it, patches.end()) << a["file"] << ": no patch of " << target;
                    EXPECT_EQ(it->second->rows, rows) << target;
                    EXPECT_NEAR(it->second->scale, mod["scale"].get<double>(), 1e-12 * std::abs(mod["scale"].get<double>())) << target;
                    row += rows;
                }
            }
            EXPECT_EQ(adapter->patches().size(), expected) << a["file"];
            req.adapters.push_back({adapter, a["user_scale"].get<float>()});
        }
        // The fused weights.
        cn::RunContext run;
        {
            const auto lease = host.hold(req.adapters, run);
            for (const auto& w : c["recorded_weights"]) {
                const at::Tensor want = reference(name + ".weight." + w.get<std::string>());
                const at::Tensor got = host.targets().find(w.get<std::string>())->tensor.to(at::kFloat);
                const double err = (got - want).abs().max().item<double>(), scale = want.abs().max().item<double>();
                EXPECT_LE(err, 2e-6 * scale) << w << ": max |fused - expected| " << err;
            }
        }
        // The image.
        run.seed = c["seed"].get<uint64_t>();
        run.begin();
        std::vector<uint8_t> out(m.generate_bytes(req));
        m.generate(req, run, out.data(), out.size());
        const at::Tensor ref = reference(name + ".image").contiguous();
        ASSERT_EQ(static_cast<size_t>(ref.numel()), out.size());
        const uint8_t* r = ref.const_data_ptr<uint8_t>();
        size_t off = 0, changed = 0;
        for (size_t i = 0; i < out.size(); ++i) off += std::abs(int(out[i]) - int(r[i])) > 1;
        EXPECT_LE(static_cast<double>(off), 0.001 * static_cast<double>(out.size())) << off << " values more than 1 level off";
        // And the adapter did something: the base image differs.
        cn::GenerateRequest base = req;
        base.adapters.clear();
        std::vector<uint8_t> plain(out.size());
        run.begin();
        m.generate(base, run, plain.data(), plain.size());
        for (size_t i = 0; i < out.size(); ++i) changed += out[i] != plain[i];
        EXPECT_GT(changed, out.size() / 10) << "the adapters changed " << changed << " values of " << out.size();
    }
}

// The statuses are cutenative's (cutenative.h, LoRA adapters): a kind of adapter it refuses (DoRA, LoKr, LoHa, text-encoder
// keys) is UNSUPPORTED; a file that does not fit the model (keys that fit nothing, shapes, ranks, non-finite values, a
// missing half) is INVALID_ARGUMENT. The fixture's status hints, written before the C ABI was, say MODEL_FORMAT for the
// second group; its error kinds and the keys to name are what the test takes from it.
TEST_F(ZImageLoraParity, RefusalFilesAreRefusedNamingTheKey) {
    for (const auto& c : lora_cases()["negative_cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        cn::Model& m = model(c["config"]);
        const auto& want = c["expected_error"];
        try {
            (void)cn::Adapter::load(lora_dir() + "/" + c["file"].get<std::string>(), {}, m.adapter_host()->targets(), m.options().device,
                                    &m);
            ADD_FAILURE() << "loaded";
        } catch (const cn::Error& e) {
            const std::string kind = want["kind"];
            const bool refused_kind = kind.rfind("unsupported", 0) == 0 || c["name"] == "neg_text_encoder";
            EXPECT_EQ(e.status(), refused_kind ? cn::Status::kUnsupported : cn::Status::kInvalidArgument) << kind << ": " << e.what();
            EXPECT_NE(std::string(e.what()).find(want["message_names"].get<std::string>()), std::string::npos)
                << e.what() << " does not name " << want["message_names"];
        }
    }
}

}  // namespace
