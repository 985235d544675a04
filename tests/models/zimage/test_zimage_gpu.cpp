// GPU (ctest label "gpu"): Z-Image on CUDA.
//  - Tiny fixtures (needs CUDA and the Qwen3 tokenizer files): fp32 on CUDA against the CPU reference intermediates
//    within a looser tolerance (different kernels; the initial noise is the CUDA generator's, so the test feeds the
//    reference's noise through the components instead), and bf16 runs end to end without error.
//  - Full size (CN_ZIMAGE_GPU_DIR: a random-weight Z-Image Turbo pipeline written by scripts/zimage_gpu_reference.py,
//    CN_ZIMAGE_GPU_REF: its results .safetensors, CN_ZIMAGE_GPU_JSON: its results JSON): bf16, 1024x1024 through
//    the model's generate, the latents after step 1 within 1 % relative MAE of diffusers bf16 with the same seed
//    (torch.Generator("cuda")), and the time of a warm call printed. Skips (printing SKIPPED) without them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/from_blob.h>

#include "core/format/checkpoint.h"
#include "core/models/registry.h"
#include "core/models/zimage/qwen3_encoder.h"
#include "core/models/zimage/zimage_config.h"
#include "core/models/zimage/zimage_model.h"
#include "core/models/zimage/zimage_vae.h"
#include "core/runtime/model.h"
#include "core/runtime/weights.h"
#include "tests/models/zimage/zimage_fixture.h"

namespace {

bool have_cuda() { return at::hasCUDA(); }

double rel_mae(const at::Tensor& got, const at::Tensor& ref) {
    const at::Tensor g = got.to(at::kCPU, at::kDouble), r = ref.to(at::kCPU, at::kDouble);
    return (g - r).abs().mean().item<double>() / r.abs().mean().item<double>();
}

at::Tensor ref_tensor(const std::shared_ptr<const cn::format::Checkpoint>& ck, const std::string& name) {
    const auto* r = ck->find(name);
    if (!r) throw std::runtime_error("missing reference tensor " + name);
    return cn::tensor_view(ck, *r).clone();
}

TEST(ZImageGpu, TinyPipelinesOnCuda) {
    if (!have_cuda()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    CN_REQUIRE_ZIMAGE_TOKENIZER();
    for (const auto& c : cn::test::zimage_cases()["cases"]) {
        const std::string name = c["name"], config = c["config"];
        SCOPED_TRACE(name);
        for (auto dtype : {c10::kFloat, c10::kBFloat16}) {
            cn::ModelOptions o;
            o.device = c10::Device(c10::kCUDA, 0);
            o.dtype = dtype;
            auto m = cn::load_model(cn::test::zimage_pipeline_dir(config), o);
            cn::GenerateRequest req;
            req.prompt = c["prompt"];
            if (!c["negative_prompt"].is_null()) req.negative_prompt = c["negative_prompt"].get<std::string>();
            req.width = c["width"];
            req.height = c["height"];
            req.steps = c["steps"];
            req.guidance = c["guidance"].get<float>();
            cn::RunContext run;
            run.seed = c["seed"].get<uint64_t>();
            run.begin();
            std::vector<uint8_t> img(m->generate_bytes(req));
            cn::zimage::ZImageTrace trace;
            cn::zimage::generate_traced(*m, req, run, img.data(), img.size(), &trace);
            ASSERT_EQ(trace.latents.size(), static_cast<size_t>(req.steps) + 1);
            EXPECT_TRUE(trace.latents.back().isfinite().all().item<bool>());
            if (dtype != c10::kFloat) continue;
            // fp32 on CUDA: each component on the reference's inputs, against the CPU reference.
            const auto ck = cn::format::Checkpoint::open(cn::test::zimage_fixtures() + "/reference", config);
            const auto parts = cn::zimage::zimage_parts(*m);
            std::vector<int32_t> ids;
            for (int64_t v : std::vector<int64_t>(trace.pos_ids.begin(), trace.pos_ids.end())) ids.push_back(static_cast<int32_t>(v));
            EXPECT_LT(rel_mae(parts.encoder->encode(ids), ref_tensor(ck, name + ".pos_embeds")), 1e-4);
            const at::Tensor lat = ref_tensor(ck, name + ".latents");
            const at::Tensor z =
                (lat[lat.size(0) - 1].unsqueeze(0).to(o.device) / parts.config->vae.scaling_factor) + parts.config->vae.shift_factor;
            // The decoder's fp32 convolutions run on cuDNN with TF32 (PyTorch's default for convolutions, which the
            // reference gets on CUDA too): ~2e-4 from the CPU's fp32.
            EXPECT_LT(rel_mae(parts.vae->decode(z)[0], ref_tensor(ck, name + ".decoded")), 1e-3);
        }
    }
}

TEST(ZImageGpu, FullSizeRandomPipelineBf16) {
    // The harness itself can be checked on a CPU against the script's --device cpu --tiny output:
    // CN_ZIMAGE_GPU_DEVICE=cpu.
    const char* devname = std::getenv("CN_ZIMAGE_GPU_DEVICE");
    const bool on_cpu = devname && std::string(devname) == "cpu";
    if (!on_cpu && !have_cuda()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    const char* dir = std::getenv("CN_ZIMAGE_GPU_DIR");
    const char* refp = std::getenv("CN_ZIMAGE_GPU_REF");
    const char* jsonp = std::getenv("CN_ZIMAGE_GPU_JSON");
    if (!dir || !refp || !jsonp) GTEST_SKIP() << "SKIPPED: set CN_ZIMAGE_GPU_DIR, CN_ZIMAGE_GPU_REF, CN_ZIMAGE_GPU_JSON";
    std::ifstream jf(jsonp);
    const nlohmann::json results = nlohmann::json::parse(jf);
    const auto& args = results["args"];
    cn::ModelOptions o;
    o.device = on_cpu ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, 0);
    o.dtype = args.value("dtype", std::string("bfloat16")) == "float32" ? c10::kFloat : c10::kBFloat16;
    auto t0 = std::chrono::steady_clock::now();
    auto m = cn::load_model(dir, o);
    auto t1 = std::chrono::steady_clock::now();
    std::printf("load: %.1f s\n", std::chrono::duration<double>(t1 - t0).count());
    cn::GenerateRequest req;
    req.prompt = args["prompt"];
    req.width = req.height = args["size"];
    req.steps = args["steps"];
    req.guidance = 0.0f;
    const uint64_t seed = args["seed"].get<uint64_t>();
    std::vector<uint8_t> img(m->generate_bytes(req));
    cn::zimage::ZImageTrace trace;
    for (int run_i = 0; run_i < 2; ++run_i) {  // the first call warms up (cuBLAS/cuDNN plans), the second is timed
        cn::RunContext run;
        run.seed = seed;
        run.begin();
        trace = cn::zimage::ZImageTrace{};
        const auto a = std::chrono::steady_clock::now();
        cn::zimage::generate_traced(*m, req, run, img.data(), img.size(), &trace);
        const auto b = std::chrono::steady_clock::now();
        std::printf("generate %dx%d, %d steps, call %d: %.3f s\n", req.width, req.height, req.steps, run_i + 1,
                    std::chrono::duration<double>(b - a).count());
    }
    const auto ck = cn::format::Checkpoint::open(
        std::string(refp).substr(0, std::string(refp).rfind('/')),
        std::string(refp).substr(std::string(refp).rfind('/') + 1, std::string(refp).size() - std::string(refp).rfind('/') - 13));
    const at::Tensor init = ref_tensor(ck, "latents_init")[0], step1 = ref_tensor(ck, "latents_step1")[0];
    const at::Tensor final_ref = ref_tensor(ck, "latents_final")[0];
    std::vector<int64_t> ref_ids;
    {
        const at::Tensor ids = ref_tensor(ck, "pos_ids").to(at::kLong).contiguous();
        ref_ids.assign(ids.const_data_ptr<int64_t>(), ids.const_data_ptr<int64_t>() + ids.numel());
    }
    EXPECT_EQ(std::vector<int64_t>(trace.pos_ids.begin(), trace.pos_ids.end()), ref_ids);
    EXPECT_TRUE(trace.latents[0].equal(init.to(at::kCPU))) << "initial noise differs from torch.randn on the CUDA generator";
    const double step1_err = rel_mae(trace.latents[1], step1), final_err = rel_mae(trace.latents.back(), final_ref);
    std::printf("latents after step 1: rel MAE %.3g vs diffusers bf16; after the last step: %.3g\n", step1_err, final_err);
    EXPECT_LT(step1_err, 0.01);
    EXPECT_TRUE(trace.latents.back().isfinite().all().item<bool>());
}

}  // namespace
