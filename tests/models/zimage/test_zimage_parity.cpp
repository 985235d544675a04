// Z-Image parity against diffusers 0.42.1 (fp32, CPU) on the tiny fixture pipelines, intermediate by
// intermediate (token ids, caption embeddings, sigma/timestep table, the first DiT call, latents after every
// step, VAE decode, RGB8), and each component fed the reference's own inputs (so an error is found where it
// starts rather than after it has propagated). Tolerances:
//   token ids, sigmas, timesteps: identical;
//   tensors: |x - ref| <= 1e-4 * |ref| + 1e-4 * mean|ref| elementwise (rtol 1e-4, atol scaled to the tensor);
//   pixels: at most 1 level apart on >= 99.9 % of values.
// The final-pixel check through the C ABI is tests/models/zimage/test_zimage_capi.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/stack.h>

#include "core/format/checkpoint.h"
#include "core/models/registry.h"
#include "core/models/zimage/qwen3_encoder.h"
#include "core/models/zimage/zimage_dit.h"
#include "core/models/zimage/zimage_model.h"
#include "core/models/zimage/zimage_scheduler.h"
#include "core/models/zimage/zimage_vae.h"
#include "core/runtime/weights.h"
#include "tests/models/zimage/zimage_fixture.h"

namespace {

struct Reference {
    std::shared_ptr<const cn::format::Checkpoint> ck;
    bool has(const std::string& name) const { return ck->find(name) != nullptr; }
    at::Tensor get(const std::string& name) const {
        const auto* ref = ck->find(name);
        if (!ref) throw std::runtime_error("reference tensor missing: " + name);
        return cn::tensor_view(ck, *ref).clone();
    }
};

const Reference& reference(const std::string& config) {
    static std::map<std::string, Reference> refs;
    auto it = refs.find(config);
    if (it == refs.end()) {
        it = refs.emplace(config, Reference{cn::format::Checkpoint::open(cn::test::zimage_fixtures() + "/reference", config)}).first;
    }
    return it->second;
}

cn::Model& model(const std::string& config) {
    static std::map<std::string, std::unique_ptr<cn::Model>> models;
    auto it = models.find(config);
    if (it == models.end()) it = models.emplace(config, cn::load_model(cn::test::zimage_pipeline_dir(config), cn::ModelOptions{})).first;
    return *it->second;
}

// The worst element's excess over the tolerance (<= 0: within), and the max abs / mean abs error for the log.
struct Closeness {
    double max_abs = 0, max_rel = 0, mean_ref = 0, worst = -1;
};
Closeness closeness(const at::Tensor& got_in, const at::Tensor& ref_in) {
    const at::Tensor got = got_in.to(at::kDouble).contiguous(), ref = ref_in.to(at::kDouble).contiguous();
    Closeness c;
    c.mean_ref = ref.abs().mean().item<double>();
    const at::Tensor diff = (got - ref).abs();
    c.max_abs = diff.max().item<double>();
    c.max_rel = (diff / (ref.abs() + 1e-30)).max().item<double>();
    const at::Tensor tol = ref.abs() * 1e-4 + 1e-4 * c.mean_ref;
    c.worst = (diff - tol).max().item<double>();
    return c;
}

#define EXPECT_CLOSE(got, ref, what)                                                                                 \
    do {                                                                                                             \
        const at::Tensor g_ = (got), r_ = (ref);                                                                     \
        ASSERT_EQ(g_.sizes(), r_.sizes()) << what;                                                                   \
        const Closeness c_ = closeness(g_, r_);                                                                      \
        EXPECT_LE(c_.worst, 0.0) << what << ": max abs err " << c_.max_abs << " (mean |ref| " << c_.mean_ref << ")"; \
        std::printf("  %-28s max abs %.3g  mean|ref| %.3g\n", std::string(what).c_str(), c_.max_abs, c_.mean_ref);   \
    } while (0)

std::vector<int64_t> ids_of(const at::Tensor& t) {
    const at::Tensor c = t.to(at::kLong).contiguous();
    return std::vector<int64_t>(c.const_data_ptr<int64_t>(), c.const_data_ptr<int64_t>() + c.numel());
}

cn::GenerateRequest request_of(const nlohmann::json& c) {
    cn::GenerateRequest r;
    r.prompt = c["prompt"].get<std::string>();
    if (!c["negative_prompt"].is_null()) r.negative_prompt = c["negative_prompt"].get<std::string>();
    r.width = c["width"];
    r.height = c["height"];
    r.steps = c["steps"];
    r.guidance = c["guidance"].get<float>();
    r.cfg_truncation = c.value("cfg_truncation", 1.0);
    // The pipeline's cfg_normalization may be given as false (off) or a number.
    const auto& n = c["cfg_normalization"];
    r.cfg_normalization = n.is_boolean() ? (n.get<bool>() ? 1.0 : 0.0) : n.get<double>();
    return r;
}

// Pixels: at most 1 level apart on >= 99.9 % of values (and never more than a few levels anywhere).
void expect_pixels(const std::vector<uint8_t>& got, const at::Tensor& ref_u8, const std::string& what) {
    const at::Tensor r = ref_u8.contiguous();
    ASSERT_EQ(static_cast<size_t>(r.numel()), got.size()) << what;
    const uint8_t* p = r.const_data_ptr<uint8_t>();
    size_t off = 0;
    int worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const int d = std::abs(static_cast<int>(got[i]) - static_cast<int>(p[i]));
        off += d > 1;
        worst = std::max(worst, d);
    }
    EXPECT_LE(static_cast<double>(off), 0.001 * static_cast<double>(got.size())) << what << ": " << off << " values more than 1 level off";
    std::printf("  %-28s %zu of %zu values > 1 level off, largest %d\n", what.c_str(), off, got.size(), worst);
}

class ZImageParity : public ::testing::Test {
protected:
    void SetUp() override { CN_REQUIRE_ZIMAGE_TOKENIZER(); }
};

// Every case through generate in `mode`, every intermediate against the reference's.
void check_every_case(cn_mode mode) {
    const auto& cases = cn::test::zimage_cases()["cases"];
    ASSERT_GE(cases.size(), 8u);
    for (const auto& c : cases) {
        const std::string name = c["name"], config = c["config"];
        SCOPED_TRACE(name);
        std::printf("case %s (%s), mode %d\n", name.c_str(), config.c_str(), static_cast<int>(mode));
        const Reference& ref = reference(config);
        cn::Model& m = model(config);
        m.set_mode(mode);
        struct Back {
            cn::Model& m;
            ~Back() { m.set_mode(CN_MODE_EAGER); }
        } back{m};
        const cn::GenerateRequest req = request_of(c);
        cn::RunContext run;
        run.seed = c["seed"].get<uint64_t>();
        run.begin();
        std::vector<uint8_t> img(m.generate_bytes(req));
        cn::zimage::ZImageTrace trace;
        cn::zimage::generate_traced(m, req, run, img.data(), img.size(), &trace);
        EXPECT_EQ(run.done(), run.total());

        const std::string p = name + ".";
        EXPECT_EQ(std::vector<int64_t>(trace.pos_ids.begin(), trace.pos_ids.end()), ids_of(ref.get(p + "pos_ids")));
        EXPECT_CLOSE(trace.pos_embeds, ref.get(p + "pos_embeds"), "pos_embeds");
        if (ref.has(p + "neg_ids")) {
            EXPECT_EQ(std::vector<int64_t>(trace.neg_ids.begin(), trace.neg_ids.end()), ids_of(ref.get(p + "neg_ids")));
            EXPECT_CLOSE(trace.neg_embeds, ref.get(p + "neg_embeds"), "neg_embeds");
        } else {
            EXPECT_TRUE(trace.neg_ids.empty());
        }
        EXPECT_TRUE(trace.sigmas.equal(ref.get(p + "sigmas"))) << "sigmas differ";
        EXPECT_TRUE(trace.timesteps.equal(ref.get(p + "timesteps"))) << "timesteps differ";
        EXPECT_CLOSE(trace.dit_out, ref.get(p + "dit_out"), "dit_out (first call)");
        const at::Tensor ref_lat = ref.get(p + "latents");
        ASSERT_EQ(static_cast<int64_t>(trace.latents.size()), ref_lat.size(0));
        EXPECT_TRUE(trace.latents[0].equal(ref_lat[0])) << "initial noise differs from torch.randn with the same seed";
        for (size_t i = 1; i < trace.latents.size(); ++i) {
            EXPECT_CLOSE(trace.latents[i], ref_lat[static_cast<int64_t>(i)], "latents after step " + std::to_string(i));
        }
        EXPECT_CLOSE(trace.decoded, ref.get(p + "decoded"), "decoded");
        expect_pixels(img, ref.get(p + "image"), "image");
    }
}

TEST_F(ZImageParity, EveryCaseEveryIntermediate) { check_every_case(CN_MODE_EAGER); }

// Fused mode (packed GEMMs, one adaLN GEMM, the norm/RoPE kernels' CPU paths) on these fp32 fixtures: within the
// same bounds as eager.
TEST_F(ZImageParity, FusedModeEveryCaseWithinTheSameBounds) { check_every_case(CN_MODE_FUSED); }

// Each component on the reference's own inputs.
TEST_F(ZImageParity, ComponentsOnReferenceInputs) {
    const auto& cases = cn::test::zimage_cases()["cases"];
    for (const auto& c : cases) {
        const std::string name = c["name"], config = c["config"];
        SCOPED_TRACE(name);
        std::printf("case %s (%s)\n", name.c_str(), config.c_str());
        const Reference& ref = reference(config);
        const cn::zimage::ZImageParts parts = cn::zimage::zimage_parts(model(config));
        const std::string p = name + ".";
        // Text encoder on the reference's token ids.
        auto to_ids = [](const at::Tensor& t) {
            std::vector<int32_t> v;
            for (int64_t x : ids_of(t)) v.push_back(static_cast<int32_t>(x));
            return v;
        };
        EXPECT_CLOSE(parts.encoder->encode(to_ids(ref.get(p + "pos_ids"))), ref.get(p + "pos_embeds"), "encoder(pos)");
        // The first DiT call on the reference's initial latents and caption embeddings.
        std::vector<at::Tensor> caps{ref.get(p + "pos_embeds")};
        const at::Tensor dit_ref = ref.get(p + "dit_out");
        if (dit_ref.size(0) == 2) caps.push_back(ref.get(p + "neg_embeds"));
        const cn::zimage::Schedule sched = cn::zimage::make_schedule(parts.config->scheduler, ref.get(p + "timesteps").size(0));
        const at::Tensor x0 = ref.get(p + "latents")[0].unsqueeze(0).repeat({dit_ref.size(0), 1, 1, 1});
        const at::Tensor t0 = sched.t_model.slice(0, 0, 1).repeat({dit_ref.size(0)});
        const cn::zimage::ZImageDit::Captions c = parts.dit->embed_captions(caps);
        const cn::zimage::DitGeometry g = parts.dit->geometry(x0.size(0), x0.size(2), x0.size(3), c.lens);
        EXPECT_CLOSE(parts.dit->forward(x0, t0, c.feats, g), dit_ref, "dit(first call)");
        // The fused path (its own norm kernels' sums and GEMM shapes): within the same bounds on these fp32 fixtures.
        const cn::zimage::ZImageDit::Captions cf = parts.dit->embed_captions(caps, /*fused=*/true);
        EXPECT_CLOSE(parts.dit->forward(x0, t0, cf.feats, g, /*fused=*/true), dit_ref, "dit(first call, fused)");
        // The VAE decoder on the reference's final latents (scaled and shifted as the pipeline does).
        const at::Tensor lat = ref.get(p + "latents");
        const at::Tensor z = (lat[lat.size(0) - 1].unsqueeze(0) / parts.config->vae.scaling_factor) + parts.config->vae.shift_factor;
        EXPECT_CLOSE(parts.vae->decode(z)[0], ref.get(p + "decoded"), "vae(final latents)");
    }
}

}  // namespace
