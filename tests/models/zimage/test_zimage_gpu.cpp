// GPU (ctest label "gpu"): Z-Image on CUDA.
//  - Tiny fixtures (needs CUDA and the Qwen3 tokenizer files): fp32 on CUDA against the CPU reference intermediates
//    within a looser tolerance (different kernels; the initial noise is the CUDA generator's, so the test feeds the
//    reference's noise through the components instead), and bf16 runs end to end without error.
//  - Modes on the tiny fixtures (bf16 and fp32, every case, CFG ones included): graph mode's latents and image equal
//    eager's bit for bit (a capture, then a replay of the same shape), fused mode's latents within 2 % relative MAE
//    of eager's in bf16 (1e-4 in fp32), and each fused kernel's CUDA path within rounding of its CPU path; adapters
//    in every mode (graph = eager bit for bit with them too); out of device memory an error, the model usable.
//  - Full size (CN_ZIMAGE_GPU_DIR: a random-weight Z-Image Turbo pipeline written by scripts/zimage_gpu_reference.py,
//    CN_ZIMAGE_GPU_REF: its results .safetensors, CN_ZIMAGE_GPU_JSON: its results JSON): bf16, 1024x1024 through
//    the model's generate, the latents after step 1 within 1 % relative MAE of diffusers bf16 with the same seed
//    (torch.Generator("cuda")), and the time of a warm call printed. Skips (printing SKIPPED) without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/Context.h>
#ifdef CN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/polar.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>

#include "core/format/checkpoint.h"
#include "core/models/registry.h"
#include "core/models/zimage/qwen3_encoder.h"
#include "core/models/zimage/zimage_config.h"
#include "core/models/zimage/zimage_model.h"
#include "core/models/zimage/zimage_vae.h"
#include "core/runtime/adapters.h"
#include "core/runtime/model.h"
#include "core/runtime/weights.h"
#include "kernels/modulated_norm.h"
#include "kernels/qk_norm_rope.h"
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

cn::GenerateRequest request_of(const nlohmann::json& c) {
    cn::GenerateRequest req;
    req.prompt = c["prompt"];
    if (!c["negative_prompt"].is_null()) req.negative_prompt = c["negative_prompt"].get<std::string>();
    req.width = c["width"];
    req.height = c["height"];
    req.steps = c["steps"];
    req.guidance = c["guidance"].get<float>();
    return req;
}

struct Generated {
    std::vector<uint8_t> image;
    cn::zimage::ZImageTrace trace;
};

Generated generate(cn::Model& m, const cn::GenerateRequest& req, uint64_t seed) {
    cn::RunContext run;
    run.seed = seed;
    run.begin();
    Generated g;
    g.image.resize(m.generate_bytes(req));
    cn::zimage::generate_traced(m, req, run, g.image.data(), g.image.size(), &g.trace);
    return g;
}

// A fixture pipeline on CUDA device 0 in `dtype`.
std::unique_ptr<cn::Model> load_on_cuda(const std::string& config, c10::ScalarType dtype) {
    cn::ModelOptions o;
    o.device = c10::Device(c10::kCUDA, 0);
    o.dtype = dtype;
    return cn::load_model(cn::test::zimage_pipeline_dir(config), o);
}

TEST(ZImageGpu, TinyPipelinesOnCuda) {
    if (!have_cuda()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    CN_REQUIRE_ZIMAGE_TOKENIZER();
    for (const auto& c : cn::test::zimage_cases()["cases"]) {
        const std::string name = c["name"], config = c["config"];
        SCOPED_TRACE(name);
        for (auto dtype : {c10::kFloat, c10::kBFloat16}) {
            auto m = load_on_cuda(config, dtype);
            const cn::GenerateRequest req = request_of(c);
            const cn::zimage::ZImageTrace trace = generate(*m, req, c["seed"].get<uint64_t>()).trace;
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
            const at::Tensor z = (lat[lat.size(0) - 1].unsqueeze(0).to(m->options().device) / parts.config->vae.scaling_factor) +
                                 parts.config->vae.shift_factor;
            // The decoder's fp32 convolutions run on cuDNN with TF32 (PyTorch's default for convolutions, which the
            // reference gets on CUDA too): ~2e-4 from the CPU's fp32.
            EXPECT_LT(rel_mae(parts.vae->decode(z)[0], ref_tensor(ck, name + ".decoded")), 1e-3);
        }
    }
}

TEST(ZImageGpu, GraphModeIsEagerBitForBitAndFusedIsClose) {
    if (!have_cuda()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    CN_REQUIRE_ZIMAGE_TOKENIZER();
    for (const auto& c : cn::test::zimage_cases()["cases"]) {
        const std::string name = c["name"], config = c["config"];
        for (auto dtype : {c10::kBFloat16, c10::kFloat}) {
            SCOPED_TRACE(name + (dtype == c10::kFloat ? " fp32" : " bf16"));
            auto m = load_on_cuda(config, dtype);
            const cn::GenerateRequest req = request_of(c);
            const uint64_t seed = c["seed"].get<uint64_t>();
            const Generated eager = generate(*m, req, seed);
            m->set_mode(CN_MODE_GRAPH);
            for (int call = 0; call < 2; ++call) {  // the first call captures, the second replays
                const Generated graph = generate(*m, req, seed);
                ASSERT_EQ(graph.trace.latents.size(), eager.trace.latents.size());
                for (size_t i = 0; i < eager.trace.latents.size(); ++i) {
                    EXPECT_TRUE(graph.trace.latents[i].equal(eager.trace.latents[i])) << "graph call " << call << ", latents " << i;
                }
                EXPECT_EQ(graph.image, eager.image) << "graph call " << call;
            }
            m->set_mode(CN_MODE_FUSED);
            for (int call = 0; call < 2; ++call) {
                const Generated fused = generate(*m, req, seed);
                const double err = rel_mae(fused.trace.latents.back(), eager.trace.latents.back());
                std::printf("%s %s fused call %d: final latents rel MAE %.3g vs eager\n", name.c_str(),
                            dtype == c10::kFloat ? "fp32" : "bf16", call, err);
                // Guidance g multiplies the paths' difference by up to 1 + g (a_guidance30: 5e-2 in bf16).
                const double bound = (dtype == c10::kFloat ? 1e-4 : 2e-2) * std::max(1.0, (1.0 + req.guidance) / 5.0);
                EXPECT_LT(err, bound);
            }
        }
    }
}

// Adapters in every mode (bf16, CUDA): the reference-made fused-qkv and refiner/embedder adapters patch the weights
// the graphs and the fused path read in place; graph mode's adapted image is eager's adapted image bit for bit, fused
// mode's close to it, and after the adapter every mode gives its base image again (no graph re-capture needed).
TEST(ZImageGpu, AdaptersInEveryMode) {
    if (!have_cuda()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    CN_REQUIRE_ZIMAGE_TOKENIZER();
    auto m = load_on_cuda("tiny_a", c10::kBFloat16);
    const cn::GenerateRequest base_req = request_of(cn::test::zimage_case("a_turbo_32x48"));
    const uint64_t seed = cn::test::zimage_case("a_turbo_32x48")["seed"].get<uint64_t>();
    cn::GenerateRequest with = base_req;
    for (const char* file : {"comfy_qkv_bf16.safetensors", "kohya_refiners_embedders_f16.safetensors"}) {
        with.adapters.push_back({cn::Adapter::load(cn::test::zimage_fixtures() + "/lora/" + file, {}, m->adapter_host()->targets(),
                                                   m->options().device, m.get()),
                                 1.0f});
    }
    const Generated eager_base = generate(*m, base_req, seed), eager_with = generate(*m, with, seed);
    ASSERT_NE(eager_with.image, eager_base.image);
    m->set_mode(CN_MODE_GRAPH);
    for (int call = 0; call < 2; ++call) {
        EXPECT_EQ(generate(*m, base_req, seed).image, eager_base.image) << "graph, no adapter, call " << call;
        EXPECT_EQ(generate(*m, with, seed).image, eager_with.image) << "graph, adapters, call " << call;
    }
    m->set_mode(CN_MODE_FUSED);
    const Generated fused_base = generate(*m, base_req, seed), fused_with = generate(*m, with, seed);
    EXPECT_LT(rel_mae(fused_with.trace.latents.back(), eager_with.trace.latents.back()), 2e-2);
    EXPECT_NE(fused_with.image, fused_base.image);
    EXPECT_EQ(generate(*m, base_req, seed).image, fused_base.image) << "fused: the base image after the adapters";
}

#ifdef CN_WITH_CUDA
// CUDA out of memory during a generation is an error of its own (the C ABI's OUT_OF_DEVICE_MEMORY) in every mode,
// and the model stays usable: with the caching allocator capped 16 MB above what it holds, the largest image the
// tiny pipeline allows (1024^2: its decoder's activations are hundreds of MB) fails, then (cap lifted) a small one
// gives the same bytes as before.
TEST(ZImageGpu, OutOfMemoryIsAnErrorAndTheModelStaysUsable) {
    if (!have_cuda()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    CN_REQUIRE_ZIMAGE_TOKENIZER();
    auto m = load_on_cuda("tiny_a", c10::kBFloat16);
    const cn::GenerateRequest small = request_of(cn::test::zimage_case("a_turbo_32x48"));
    cn::GenerateRequest big = small;
    big.width = big.height = 1024;  // tiny_a's position range: 64 patches of 16 px
    big.steps = 1;
    for (cn_mode mode : {CN_MODE_EAGER, CN_MODE_GRAPH, CN_MODE_FUSED}) {
        SCOPED_TRACE(static_cast<int>(mode));
        m->set_mode(mode);
        const Generated before = generate(*m, small, 3);
        c10::cuda::CUDACachingAllocator::emptyCache();
        const double total = static_cast<double>(at::cuda::getDeviceProperties(0)->totalGlobalMem);
        const double held = static_cast<double>(c10::cuda::CUDACachingAllocator::getDeviceStats(0).reserved_bytes[0].current);
        c10::cuda::CUDACachingAllocator::setMemoryFraction(std::min(1.0, (held + 16.0 * (1 << 20)) / total), 0);
        bool oom = false;
        try {
            (void)generate(*m, big, 3);
        } catch (const c10::OutOfMemoryError&) {
            oom = true;
        }
        c10::cuda::CUDACachingAllocator::setMemoryFraction(1.0, 0);
        EXPECT_TRUE(oom) << "a 1024^2 image with 16 MB to spare did not run out of memory";
        EXPECT_EQ(generate(*m, small, 3).image, before.image) << "the model after the failure";
    }
}
#endif  // CN_WITH_CUDA

TEST(ZImageGpu, FusedKernelsMatchTheirCpuPaths) {
    if (!have_cuda()) GTEST_SKIP() << "SKIPPED: no CUDA device";
    const c10::Device cuda(c10::kCUDA, 0);
    for (auto dtype : {c10::kBFloat16, c10::kFloat}) {
        SCOPED_TRACE(dtype == c10::kFloat ? "fp32" : "bf16");
        const auto o = at::TensorOptions().dtype(dtype);
        const int64_t B = 2, S = 37, D = 3840, H = 30, hd = 128;
        const at::Tensor x = at::randn({B, S, D}, o), y = at::randn({B, S, D}, o) * 3.0;
        const at::Tensor w = at::rand({D}, o) + 0.5, scale = at::randn({B, D}, o) + 1.0, gate = at::randn({B, D}, o).tanh();
        // Rounding-level agreement: a few fp32 ulps of the variance move a bf16 result by at most one unit in the last
        // place (2^-7 relative), an fp32 one by a few 1e-7.
        const double tol = dtype == c10::kFloat ? 1e-5 : 1.6e-2;
        auto close = [&](const at::Tensor& got, const at::Tensor& ref, const char* what) {
            const at::Tensor g = got.to(at::kCPU, at::kDouble), r = ref.to(at::kDouble);
            const double worst = ((g - r).abs() / (r.abs() + r.abs().mean())).max().item<double>();
            const double equal = (g == r).to(at::kDouble).mean().item<double>();
            std::printf("%s %s: max rel %.3g, %.4f of values bit-equal\n", what, dtype == c10::kFloat ? "fp32" : "bf16", worst, equal);
            EXPECT_LT(worst, tol) << what;
        };
        close(cn::kernels::rms_norm_scale(x.to(cuda), w.to(cuda), 1e-5, scale.to(cuda)), cn::kernels::rms_norm_scale_cpu(x, w, 1e-5, scale),
              "rms_norm_scale");
        at::Tensor xc = x.to(cuda), xh = x.clone();
        cn::kernels::add_gated_rms_norm(xc, y.to(cuda), w.to(cuda), 1e-5, gate.to(cuda));
        cn::kernels::add_gated_rms_norm_cpu(xh, y, w, 1e-5, gate);
        close(xc, xh, "add_gated_rms_norm");
        const at::Tensor qkv = at::randn({B, S, 3 * H * hd}, o), qw = at::rand({hd}, o) + 0.5, kw = at::rand({hd}, o) + 0.5;
        const at::Tensor ang = at::randn({B, S, hd / 2}, at::TensorOptions().dtype(at::kFloat)) * 3.0;
        const at::Tensor freqs = at::polar(at::ones_like(ang), ang);
        auto [qg, kg, vg] = cn::kernels::qk_norm_rope(qkv.to(cuda), H, qw.to(cuda), kw.to(cuda), 1e-5, freqs.to(cuda));
        auto [qc, kc, vc] = cn::kernels::qk_norm_rope_cpu(qkv, H, qw, kw, 1e-5, freqs);
        close(qg, qc, "qk_norm_rope q");
        close(kg, kc, "qk_norm_rope k");
        EXPECT_TRUE(vg.to(at::kCPU).equal(vc)) << "qk_norm_rope v (a copy)";
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
