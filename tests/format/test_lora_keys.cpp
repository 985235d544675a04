// LoRA key planning (core/format/lora_keys.h) on a small Z-Image-shaped model: every key family of
// ../shared/specs/zimage.md §5.3 and every row of §5.5 resolved to the model's own weights (targets, row slices,
// up-matrix rows, rank, scale), the scale rules of §5.4, and the refusals, each naming its key. LibTorch-free.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "core/common/status.h"
#include "core/format/lora_keys.h"

using cn::Status;
using cn::format::DType;
using cn::format::LoraPatch;
using cn::format::LoraPlan;
using cn::format::LoraTargetInfo;
using cn::format::LoraTensorInfo;
using cn::format::plan_lora;

namespace {

constexpr int64_t D = 32, F = 64, A = 32, kPatch = 64, kCap = 48, kFreq = 256;
const char* kLabel = "/loras/style.safetensors";
using Meta = std::map<std::string, std::string>;

// The weights ZImageDit declares with declare_linear (core/models/zimage/zimage_dit.cpp), for dim 32, ffn 64,
// 2 main layers, 1 noise_refiner and 1 context_refiner block (no adaLN), in declaration order.
std::vector<LoraTargetInfo> tiny_targets() {
    std::vector<LoraTargetInfo> t = {{"all_x_embedder.2-1.weight", D, kPatch},
                                     {"all_final_layer.2-1.adaLN_modulation.1.weight", D, A},
                                     {"all_final_layer.2-1.linear.weight", kPatch, D},
                                     {"t_embedder.mlp.0.weight", 1024, kFreq},
                                     {"t_embedder.mlp.2.weight", A, 1024},
                                     {"cap_embedder.1.weight", D, kCap}};
    auto block = [&](const std::string& p, bool modulated) {
        for (const char* n : {"attention.to_q", "attention.to_k", "attention.to_v", "attention.to_out.0"})
            t.push_back({p + n + ".weight", D, D});
        t.push_back({p + "feed_forward.w1.weight", F, D});
        t.push_back({p + "feed_forward.w2.weight", D, F});
        t.push_back({p + "feed_forward.w3.weight", F, D});
        if (modulated) t.push_back({p + "adaLN_modulation.0.weight", 4 * D, A});
    };
    block("noise_refiner.0.", true);
    block("context_refiner.0.", false);
    block("layers.0.", true);
    block("layers.1.", true);
    return t;
}

int64_t target_in(const std::string& module) {
    for (const auto& t : tiny_targets()) {
        if (t.name == module + ".weight") return t.in;
    }
    ADD_FAILURE() << "no target " << module;
    return 0;
}
int64_t target_out(const std::string& module) {
    for (const auto& t : tiny_targets()) {
        if (t.name == module + ".weight") return t.out;
    }
    ADD_FAILURE() << "no target " << module;
    return 0;
}

// A file under construction: factor pairs and alphas.
struct File {
    std::vector<LoraTensorInfo> tensors;
    Meta meta;

    File& pair(const std::string& stem, const std::string& down_sfx, const std::string& up_sfx, int64_t r, int64_t in, int64_t out,
               DType dt = DType::kBF16) {
        tensors.push_back({stem + down_sfx, dt, {r, in}, std::nullopt});
        tensors.push_back({stem + up_sfx, dt, {out, r}, std::nullopt});
        return *this;
    }
    // lora_A / lora_B pair on a diffusers module of the tiny model.
    File& peft(const std::string& prefix, const std::string& module, int64_t r, const std::string& a = ".lora_A.weight",
               const std::string& b = ".lora_B.weight") {
        return pair(prefix + module, a, b, r, target_in(module), target_out(module));
    }
    File& kohya(const std::string& stem, int64_t r, int64_t in, int64_t out) {
        return pair(stem, ".lora_down.weight", ".lora_up.weight", r, in, out);
    }
    File& alpha(const std::string& stem, double v, DType dt = DType::kF32) {
        tensors.push_back({stem + ".alpha", dt, {}, v});
        return *this;
    }
    File& raw(LoraTensorInfo t) {
        tensors.push_back(std::move(t));
        return *this;
    }
    LoraPlan plan(const std::vector<LoraTargetInfo>& targets = tiny_targets()) const { return plan_lora(tensors, meta, targets, kLabel); }
};

const LoraPatch& patch_of(const LoraPlan& plan, const std::string& target) {
    for (const auto& p : plan.patches) {
        if (p.target == target) return p;
    }
    static const LoraPatch none;
    ADD_FAILURE() << "no patch for " << target;
    return none;
}

// One expected patch: target, rows [row_begin, +rows), down / up names, up_row_begin, rank, scale, source.
struct Want {
    std::string target;
    int64_t row_begin, rows;
    std::string down, up;
    int64_t up_row_begin, rank;
    double scale;
    std::string source;
};

void expect_plan(const LoraPlan& plan, const std::string& family, std::vector<Want> want) {
    EXPECT_EQ(plan.family, family);
    std::sort(want.begin(), want.end(),
              [](const Want& a, const Want& b) { return a.target < b.target || (a.target == b.target && a.row_begin < b.row_begin); });
    ASSERT_EQ(plan.patches.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        const LoraPatch& p = plan.patches[i];
        const Want& w = want[i];
        SCOPED_TRACE(w.target);
        EXPECT_EQ(p.target, w.target);
        EXPECT_EQ(p.row_begin, w.row_begin);
        EXPECT_EQ(p.rows, w.rows);
        EXPECT_EQ(p.down, w.down);
        EXPECT_EQ(p.up, w.up);
        EXPECT_EQ(p.up_row_begin, w.up_row_begin);
        EXPECT_EQ(p.rank, w.rank);
        EXPECT_EQ(p.scale, w.scale);  // exact: each is alpha / rank (or / sqrt(rank)) computed once in fp64
        EXPECT_EQ(p.source, w.source);
    }
}

void expect_error(const std::function<void()>& fn, Status status, const std::vector<std::string>& needles) {
    try {
        fn();
        ADD_FAILURE() << "no error; expected: " << needles.front();
    } catch (const cn::Error& e) {
        EXPECT_EQ(e.status(), status) << e.message();
        EXPECT_EQ(e.message().rfind(std::string(kLabel) + ": ", 0), 0u) << "message: " << e.message();
        for (const auto& n : needles) EXPECT_NE(e.message().find(n), std::string::npos) << "want \"" << n << "\" in: " << e.message();
    }
}
void expect_error(const File& f, Status status, const std::vector<std::string>& needles) {
    expect_error([&] { f.plan(); }, status, needles);
}

// A whole-module patch of `module` (diffusers name) from `stem` with the factor suffixes given.
Want whole(const std::string& module, const std::string& stem, const std::string& down_sfx, const std::string& up_sfx, int64_t r,
           double scale) {
    return {module + ".weight", 0, target_out(module), stem + down_sfx, stem + up_sfx, 0, r, scale, stem};
}

}  // namespace

// ---- §5.3 families -------------------------------------------------------------------------------------------------

// (a) diffusers/PEFT: "transformer." + lora_A/B, alpha and rank in lora_adapter_metadata under "transformer."
// (diffusers' save_lora_weights packs the LoraConfig with that prefix).
TEST(LoraKeys, DiffusersPeftWithMetadata) {
    File f;
    for (const char* m : {"layers.0.attention.to_q", "layers.0.attention.to_k", "layers.0.attention.to_v", "layers.0.attention.to_out.0"}) {
        f.peft("transformer.", m, 4);
    }
    f.meta = {{"format", "pt"},
              {"lora_adapter_metadata",
               R"({"transformer.lora_alpha": 8, "transformer.r": 4, "transformer.target_modules": ["to_k","to_q","to_v","to_out.0"],
                   "transformer.use_rslora": false, "transformer.use_dora": false, "transformer.rank_pattern": {},
                   "transformer.alpha_pattern": {}})"}};
    std::vector<Want> want;
    for (const char* m : {"layers.0.attention.to_q", "layers.0.attention.to_k", "layers.0.attention.to_v", "layers.0.attention.to_out.0"}) {
        want.push_back(whole(m, std::string("transformer.") + m, ".lora_A.weight", ".lora_B.weight", 4, 2.0));
    }
    expect_plan(f.plan(), "diffusers/peft", want);
}

// A model's save_lora_adapter: bare keys (diffusers' pipeline loads them as nothing: §5.5) and unprefixed metadata.
TEST(LoraKeys, BarePeftKeysWithUnprefixedMetadata) {
    File f;
    f.peft("", "layers.1.feed_forward.w2", 8);
    f.meta = {{"lora_adapter_metadata", R"({"r": 8, "lora_alpha": 2})"}};
    expect_plan(f.plan(), "diffusers/peft",
                {whole("layers.1.feed_forward.w2", "layers.1.feed_forward.w2", ".lora_A.weight", ".lora_B.weight", 8, 0.25)});
}

// (b) ai-toolkit: "diffusion_model." + lora_A/B, no alpha anywhere: scale 1, whatever the rank. Its default targets:
// attention, feed-forward and adaLN of the main layers.
TEST(LoraKeys, AiToolkit) {
    File f;
    std::vector<Want> want;
    for (const char* m : {"attention.to_q", "attention.to_k", "attention.to_v", "attention.to_out.0", "feed_forward.w1", "feed_forward.w2",
                          "feed_forward.w3", "adaLN_modulation.0"}) {
        for (const char* l : {"layers.0.", "layers.1."}) {
            const std::string module = std::string(l) + m;
            f.peft("diffusion_model.", module, 16);
            want.push_back(whole(module, "diffusion_model." + module, ".lora_A.weight", ".lora_B.weight", 16, 1.0));
        }
    }
    expect_plan(f.plan(), "ai-toolkit", want);
}

// (c) musubi-tuner / kohya: "lora_unet_" + underscored names, lora_down/lora_up, alpha folded as alpha / rank.
// diffusers folds it into the file-dtype factors and, when alpha/rank < 0.5, moves powers of two from A to B
// (get_alpha_scales); the plan returns the exact fp64 factor, so neither case needs rebalancing here.
TEST(LoraKeys, KohyaAlphaOverRank) {
    File f;
    f.kohya("lora_unet_layers_0_attention_to_q", 8, D, D).alpha("lora_unet_layers_0_attention_to_q", 4);                 // 0.5
    f.kohya("lora_unet_layers_0_attention_to_out_0", 16, D, D).alpha("lora_unet_layers_0_attention_to_out_0", 1);        // 1/16 < 0.5
    f.kohya("lora_unet_layers_1_feed_forward_w1", 8, D, F).alpha("lora_unet_layers_1_feed_forward_w1", 16);              // alpha > rank
    f.kohya("lora_unet_layers_1_feed_forward_w3", 6, D, F).alpha("lora_unet_layers_1_feed_forward_w3", 4, DType::kI64);  // 2/3
    f.kohya("lora_unet_layers_1_feed_forward_w2", 4, F, D);                                                              // no alpha: 1
    const std::string dn = ".lora_down.weight", up = ".lora_up.weight";
    expect_plan(f.plan(), "kohya",
                {whole("layers.0.attention.to_q", "lora_unet_layers_0_attention_to_q", dn, up, 8, 0.5),
                 whole("layers.0.attention.to_out.0", "lora_unet_layers_0_attention_to_out_0", dn, up, 16, 0.0625),
                 whole("layers.1.feed_forward.w1", "lora_unet_layers_1_feed_forward_w1", dn, up, 8, 2.0),
                 whole("layers.1.feed_forward.w3", "lora_unet_layers_1_feed_forward_w3", dn, up, 6, 4.0 / 6.0),
                 whole("layers.1.feed_forward.w2", "lora_unet_layers_1_feed_forward_w2", dn, up, 4, 1.0)});
}

// (d) musubi's ComfyUI export: fused qkv with down [3r, D], a block-diagonal up [3D, 3r] and alpha = 3 x alpha
// (sd-scripts #2204), "attention_out" for to_out.0. alpha / rank as is gives 3a / 3r = a / r: the to_q, to_k, to_v
// patches share the down matrix and take rows 0, D, 2D of the up matrix.
TEST(LoraKeys, KohyaComfyFusedQkv) {
    const int64_t r = 4;
    const double a = 16;
    File f;
    f.pair("lora_unet_layers_1_attention_qkv", ".lora_down.weight", ".lora_up.weight", 3 * r, D, 3 * D)
        .alpha("lora_unet_layers_1_attention_qkv", 3 * a);
    f.kohya("lora_unet_layers_1_attention_out", r, D, D).alpha("lora_unet_layers_1_attention_out", a);
    f.kohya("lora_unet_layers_1_feed_forward_w1", r, D, F).alpha("lora_unet_layers_1_feed_forward_w1", a);
    const std::string q = "lora_unet_layers_1_attention_qkv", dn = ".lora_down.weight", up = ".lora_up.weight";
    const LoraPlan plan = f.plan();
    expect_plan(plan, "kohya-comfy-fused-qkv",
                {{"layers.1.attention.to_q.weight", 0, D, q + dn, q + up, 0, 3 * r, 4.0, q},
                 {"layers.1.attention.to_k.weight", 0, D, q + dn, q + up, D, 3 * r, 4.0, q},
                 {"layers.1.attention.to_v.weight", 0, D, q + dn, q + up, 2 * D, 3 * r, 4.0, q},
                 whole("layers.1.attention.to_out.0", "lora_unet_layers_1_attention_out", dn, up, r, 4.0),
                 whole("layers.1.feed_forward.w1", "lora_unet_layers_1_feed_forward_w1", dn, up, r, 4.0)});
    EXPECT_EQ(patch_of(plan, "layers.1.attention.to_k.weight").scale, a / r);  // the ComfyUI export's alpha x 3 pinned
}

// (e) DiffSynth-Studio: bare PEFT names with ".default", lora_alpha = rank and no metadata: scale 1.
TEST(LoraKeys, DiffSynth) {
    File f;
    f.peft("", "layers.0.attention.to_q", 32 / 4, ".lora_A.default.weight", ".lora_B.default.weight");
    f.peft("", "context_refiner.0.attention.to_v", 8, ".lora_A.default.weight", ".lora_B.default.weight");
    expect_plan(f.plan(), "diffsynth",
                {whole("layers.0.attention.to_q", "layers.0.attention.to_q", ".lora_A.default.weight", ".lora_B.default.weight", 8, 1.0),
                 whole("context_refiner.0.attention.to_v", "context_refiner.0.attention.to_v", ".lora_A.default.weight",
                       ".lora_B.default.weight", 8, 1.0)});
}

// (f) "Anime-Z" (diffusers #13203): kohya keys with both the split to_q/to_k/to_v and the fused qkv of one block
// (and to_out_0 next to out). diffusers keeps the split keys and drops the fused ones, ComfyUI adds both: cutenative
// refuses, naming both keys.
TEST(LoraKeys, SplitAndFusedQkvTogetherAreRefused) {
    File f;
    f.kohya("lora_unet_context_refiner_0_attention_to_q", 4, D, D).alpha("lora_unet_context_refiner_0_attention_to_q", 4);
    f.kohya("lora_unet_context_refiner_0_attention_qkv", 4, D, 3 * D).alpha("lora_unet_context_refiner_0_attention_qkv", 4);
    expect_error(f, Status::kInvalidArgument,
                 {"lora_unet_context_refiner_0_attention_to_q: patches context_refiner.0.attention.to_q.weight",
                  "\"lora_unet_context_refiner_0_attention_qkv\"", "patches a weight twice"});
    File g;
    g.kohya("lora_unet_layers_0_attention_out", 4, D, D).kohya("lora_unet_layers_0_attention_to_out_0", 4, D, D);
    expect_error(g, Status::kInvalidArgument, {"layers.0.attention.to_out.0.weight", "lora_unet_layers_0_attention_out"});
    // The same module under two spellings is the same conflict.
    File h;
    h.peft("transformer.", "layers.0.feed_forward.w1", 4).peft("diffusion_model.", "layers.0.feed_forward.w1", 4);
    expect_error(h, Status::kInvalidArgument, {"diffusion_model.layers.0.feed_forward.w1", "transformer.layers.0.feed_forward.w1"});
}

// (g) community kohya files with adaLN (diffusers #13249 needed a name fixup).
TEST(LoraKeys, KohyaAdaLn) {
    File f;
    f.kohya("lora_unet_layers_0_adaLN_modulation_0", 4, A, 4 * D).alpha("lora_unet_layers_0_adaLN_modulation_0", 2);
    f.kohya("lora_unet_noise_refiner_0_adaLN_modulation_0", 4, A, 4 * D).alpha("lora_unet_noise_refiner_0_adaLN_modulation_0", 2);
    const std::string dn = ".lora_down.weight", up = ".lora_up.weight";
    expect_plan(f.plan(), "kohya",
                {whole("layers.0.adaLN_modulation.0", "lora_unet_layers_0_adaLN_modulation_0", dn, up, 4, 0.5),
                 whole("noise_refiner.0.adaLN_modulation.0", "lora_unet_noise_refiner_0_adaLN_modulation_0", dn, up, 4, 0.5)});
}

// (h) the original (Comfy single-file) layout: dotted qkv (diffusers leaves it as "attention.qkv", no such module),
// "attention.out" with alpha (diffusers raises), x_embedder / final_layer (diffusers maps them to wrong names).
TEST(LoraKeys, OriginalNames) {
    File f;
    const std::string q = "diffusion_model.layers.0.attention.qkv", o = "diffusion_model.layers.0.attention.out";
    const std::string xe = "diffusion_model.x_embedder", fl = "diffusion_model.final_layer.linear",
                      fm = "diffusion_model.final_layer.adaLN_modulation.1";
    f.pair(q, ".lora_A.weight", ".lora_B.weight", 8, D, 3 * D);
    f.pair(o, ".lora_A.weight", ".lora_B.weight", 8, D, D).alpha(o, 4);
    f.pair(xe, ".lora_A.weight", ".lora_B.weight", 2, kPatch, D);
    f.pair(fl, ".lora_A.weight", ".lora_B.weight", 2, D, kPatch);
    f.pair(fm, ".lora_A.weight", ".lora_B.weight", 2, A, D);
    const std::string a = ".lora_A.weight", b = ".lora_B.weight";
    expect_plan(f.plan(), "original-names",
                {{"layers.0.attention.to_q.weight", 0, D, q + a, q + b, 0, 8, 1.0, q},
                 {"layers.0.attention.to_k.weight", 0, D, q + a, q + b, D, 8, 1.0, q},
                 {"layers.0.attention.to_v.weight", 0, D, q + a, q + b, 2 * D, 8, 1.0, q},
                 whole("layers.0.attention.to_out.0", o, a, b, 8, 0.5),
                 whole("all_x_embedder.2-1", xe, a, b, 2, 1.0),
                 whole("all_final_layer.2-1.linear", fl, a, b, 2, 1.0),
                 whole("all_final_layer.2-1.adaLN_modulation.1", fm, a, b, 2, 1.0)});
}

TEST(LoraKeys, KohyaOriginalNames) {
    File f;
    f.kohya("lora_unet_x_embedder", 4, kPatch, D).kohya("lora_unet_final_layer_linear", 4, D, kPatch);
    f.kohya("lora_unet_final_layer_adaLN_modulation_1", 4, A, D);
    const std::string dn = ".lora_down.weight", up = ".lora_up.weight";
    expect_plan(f.plan(), "kohya-comfy",
                {whole("all_x_embedder.2-1", "lora_unet_x_embedder", dn, up, 4, 1.0),
                 whole("all_final_layer.2-1.linear", "lora_unet_final_layer_linear", dn, up, 4, 1.0),
                 whole("all_final_layer.2-1.adaLN_modulation.1", "lora_unet_final_layer_adaLN_modulation_1", dn, up, 4, 1.0)});
}

// (i) text-encoder LoRA next to transformer keys: diffusers mangles and ignores it; cutenative refuses.
TEST(LoraKeys, TextEncoderKeysAreRefused) {
    File f;
    f.kohya("lora_unet_layers_0_attention_to_q", 4, D, D).kohya("lora_te_model_layers_0_self_attn_q_proj", 4, 16, 16);
    expect_error(f, Status::kUnsupported, {"lora_te_model_layers_0_self_attn_q_proj.lora_down.weight: a text-encoder LoRA", "refuses"});
    File g;
    g.peft("transformer.", "layers.0.attention.to_q", 4)
        .pair("text_encoder.layers.0.q_proj", ".lora_A.weight", ".lora_B.weight", 4, 16, 16);
    expect_error(g, Status::kUnsupported, {"text_encoder.layers.0.q_proj.lora_A.weight", "text-encoder"});
}

// ---- §5.5: every converter row, and what cutenative makes of it ------------------------------------------------------

TEST(LoraKeys, KohyaNamesOfEveryLinear) {
    struct Row {
        const char* stem;
        const char* module;
    } rows[] = {
        {"lora_unet_layers_0_attention_to_q", "layers.0.attention.to_q"},
        {"lora_unet_layers_0_attention_to_out_0", "layers.0.attention.to_out.0"},
        {"lora_unet_layers_0_feed_forward_w1", "layers.0.feed_forward.w1"},
        {"lora_unet_layers_0_adaLN_modulation_0", "layers.0.adaLN_modulation.0"},
        {"lora_unet_noise_refiner_0_attention_to_k", "noise_refiner.0.attention.to_k"},
        {"lora_unet_context_refiner_0_feed_forward_w2", "context_refiner.0.feed_forward.w2"},
        {"lora_unet_all_final_layer_2-1_linear", "all_final_layer.2-1.linear"},
        {"lora_unet_cap_embedder_1", "cap_embedder.1"},
        {"lora_unet_t_embedder_mlp_0", "t_embedder.mlp.0"},
        {"lora_unet_t_embedder_mlp_2", "t_embedder.mlp.2"},
        {"lora_unet_all_x_embedder_2-1", "all_x_embedder.2-1"},
    };
    File f;
    std::vector<Want> want;
    for (const Row& row : rows) {
        f.kohya(row.stem, 2, target_in(row.module), target_out(row.module)).alpha(row.stem, 1);
        want.push_back(whole(row.module, row.stem, ".lora_down.weight", ".lora_up.weight", 2, 0.5));
    }
    expect_plan(f.plan(), "kohya", want);
}

// kohya fused qkv of the original layout (up [3D, r], not block-diagonal): split, A shared, alpha / r.
TEST(LoraKeys, KohyaFusedQkvPlain) {
    File f;
    const std::string q = "lora_unet_noise_refiner_0_attention_qkv", dn = ".lora_down.weight", up = ".lora_up.weight";
    f.kohya(q, 8, D, 3 * D).alpha(q, 2);
    expect_plan(f.plan(), "kohya-comfy-fused-qkv",
                {{"noise_refiner.0.attention.to_q.weight", 0, D, q + dn, q + up, 0, 8, 0.25, q},
                 {"noise_refiner.0.attention.to_k.weight", 0, D, q + dn, q + up, D, 8, 0.25, q},
                 {"noise_refiner.0.attention.to_v.weight", 0, D, q + dn, q + up, 2 * D, 8, 0.25, q}});
}

TEST(LoraKeys, FusedQkvUpMustHaveThreeTimesTheRows) {
    File f;
    f.kohya("lora_unet_layers_0_attention_qkv", 4, D, 2 * D);
    expect_error(f, Status::kInvalidArgument,
                 {"lora_unet_layers_0_attention_qkv.lora_up.weight: shape [64, 4]: a fused qkv up matrix needs the rows of to_q, "
                  "to_k and to_v, 32 + 32 + 32 = 96"});
    File g;
    g.pair("diffusion_model.layers.0.attention.qkv", ".lora_A.weight", ".lora_B.weight", 4, D, D);
    expect_error(g, Status::kInvalidArgument, {"diffusion_model.layers.0.attention.qkv.lora_B.weight", "= 96"});
}

// "transformer." with .alpha or ".default" (diffusers: double prefix, nothing matches), "base_model.model." +
// ".default" (nothing matches), bare keys without .default (a silent no-op in diffusers): all resolve here.
TEST(LoraKeys, PrefixesDiffusersMishandles) {
    File f;
    f.peft("transformer.", "layers.0.attention.to_q", 4).alpha("transformer.layers.0.attention.to_q", 2);
    f.peft("transformer.", "layers.0.attention.to_k", 4, ".lora_A.default.weight", ".lora_B.default.weight");
    expect_plan(f.plan(), "peft",
                {whole("layers.0.attention.to_q", "transformer.layers.0.attention.to_q", ".lora_A.weight", ".lora_B.weight", 4, 0.5),
                 whole("layers.0.attention.to_k", "transformer.layers.0.attention.to_k", ".lora_A.default.weight", ".lora_B.default.weight",
                       4, 1.0)});
    File g;
    g.peft("base_model.model.", "layers.1.attention.to_v", 4, ".lora_A.default.weight", ".lora_B.default.weight");
    expect_plan(g.plan(), "peft",
                {whole("layers.1.attention.to_v", "base_model.model.layers.1.attention.to_v", ".lora_A.default.weight",
                       ".lora_B.default.weight", 4, 1.0)});
    File h;
    h.peft("", "layers.1.attention.to_v", 4);
    expect_plan(h.plan(), "diffusers/peft",
                {whole("layers.1.attention.to_v", "layers.1.attention.to_v", ".lora_A.weight", ".lora_B.weight", 4, 1.0)});
}

// The other pair names and prefixes of §5.9: bare lora_A / lora_B, lora.down / lora.up, and the prefixes
// "model.diffusion_model.", "unet.", "lycoris_", "lora_transformer_".
TEST(LoraKeys, OtherPairNamesAndPrefixes) {
    File bare;
    bare.peft("transformer.", "layers.0.feed_forward.w3", 4, ".lora_A", ".lora_B");
    expect_plan(bare.plan(), "diffusers/peft",
                {whole("layers.0.feed_forward.w3", "transformer.layers.0.feed_forward.w3", ".lora_A", ".lora_B", 4, 1.0)});
    File dot;
    dot.peft("", "layers.0.attention.to_q", 4, ".lora.down.weight", ".lora.up.weight").alpha("layers.0.attention.to_q", 8);
    expect_plan(dot.plan(), "kohya-dot",
                {whole("layers.0.attention.to_q", "layers.0.attention.to_q", ".lora.down.weight", ".lora.up.weight", 4, 2.0)});
    File comfy;
    comfy.peft("model.diffusion_model.", "cap_embedder.1", 4);
    expect_plan(comfy.plan(), "comfy",
                {whole("cap_embedder.1", "model.diffusion_model.cap_embedder.1", ".lora_A.weight", ".lora_B.weight", 4, 1.0)});
    File unet;
    unet.peft("unet.", "t_embedder.mlp.2", 4);
    expect_plan(unet.plan(), "diffusers/peft",
                {whole("t_embedder.mlp.2", "unet.t_embedder.mlp.2", ".lora_A.weight", ".lora_B.weight", 4, 1.0)});
    File lyco;
    lyco.kohya("lycoris_layers_1_feed_forward_w2", 4, F, D).alpha("lycoris_layers_1_feed_forward_w2", 1);
    expect_plan(lyco.plan(), "lycoris",
                {whole("layers.1.feed_forward.w2", "lycoris_layers_1_feed_forward_w2", ".lora_down.weight", ".lora_up.weight", 4, 0.25)});
    File lt;
    lt.kohya("lora_transformer_layers_1_attention_to_k", 4, D, D);
    expect_plan(
        lt.plan(), "kohya",
        {whole("layers.1.attention.to_k", "lora_transformer_layers_1_attention_to_k", ".lora_down.weight", ".lora_up.weight", 4, 1.0)});
}

// ---- Scale: lora_adapter_metadata (§5.4) ------------------------------------------------------------------------------

TEST(LoraKeys, MetadataRsLora) {
    File f;
    f.peft("transformer.", "layers.0.attention.to_q", 16);
    f.meta = {{"lora_adapter_metadata", R"({"transformer.r": 16, "transformer.lora_alpha": 8, "transformer.use_rslora": true})"}};
    EXPECT_EQ(patch_of(f.plan(), "layers.0.attention.to_q.weight").scale, 2.0);  // 8 / sqrt(16)
    f.meta = {{"lora_adapter_metadata", R"({"transformer.r": 16, "transformer.lora_alpha": 8, "transformer.use_rslora": false})"}};
    EXPECT_EQ(patch_of(f.plan(), "layers.0.attention.to_q.weight").scale, 0.5);
    f.meta = {{"lora_adapter_metadata", R"({"transformer.r": 16, "transformer.lora_alpha": 6.5})"}};
    EXPECT_EQ(patch_of(f.plan(), "layers.0.attention.to_q.weight").scale, 6.5 / 16);
}

// rank_pattern / alpha_pattern keys match as PEFT's get_pattern_key does: the first key (in file order) K with
// re.match(rf"(.*\.)?({K})$", module).
TEST(LoraKeys, MetadataPatterns) {
    File f;
    f.peft("transformer.", "layers.0.attention.to_q", 4);
    f.peft("transformer.", "layers.1.attention.to_q", 8);
    f.peft("transformer.", "layers.0.attention.to_k", 2);
    f.peft("transformer.", "noise_refiner.0.attention.to_k", 2);
    f.peft("transformer.", "layers.0.feed_forward.w1", 4);
    f.peft("transformer.", "layers.1.feed_forward.w1", 4);
    f.peft("transformer.", "context_refiner.0.attention.to_v", 4);
    f.meta = {{"lora_adapter_metadata",
               R"({"transformer.r": 4, "transformer.lora_alpha": 4,
                   "transformer.rank_pattern": {"^layers.1.attention.to_q": 8, "to_k": 2, "^to_v": 16},
                   "transformer.alpha_pattern": {"w1": 16, "layers.0.feed_forward.w1": 32, "noise_refiner\\.\\d+\\.attention\\.to_k": 1,
                                                 "context_.*to_v": 12}})"}};
    const LoraPlan plan = f.plan();
    EXPECT_EQ(patch_of(plan, "layers.0.attention.to_q.weight").scale, 1.0);         // defaults
    EXPECT_EQ(patch_of(plan, "layers.1.attention.to_q.weight").scale, 0.5);         // rank 8 (anchored full name)
    EXPECT_EQ(patch_of(plan, "layers.0.attention.to_k.weight").scale, 2.0);         // rank 2 (suffix)
    EXPECT_EQ(patch_of(plan, "noise_refiner.0.attention.to_k.weight").scale, 0.5);  // rank 2, alpha 1 ("\d", "\.")
    EXPECT_EQ(patch_of(plan, "layers.0.feed_forward.w1.weight").scale, 4.0);        // "w1" comes first in the file
    EXPECT_EQ(patch_of(plan, "layers.1.feed_forward.w1.weight").scale, 4.0);
    EXPECT_EQ(patch_of(plan, "context_refiner.0.attention.to_v.weight").scale, 3.0);  // "^to_v" is anchored: rank 4
    // The other order: the full name first.
    f.meta = {{"lora_adapter_metadata", R"({"r": 4, "lora_alpha": 4, "rank_pattern": {"^layers.1.attention.to_q": 8, "to_k": 2},
                                            "alpha_pattern": {"layers.0.feed_forward.w1": 32, "w1": 16}})"}};
    const LoraPlan other = f.plan();
    EXPECT_EQ(patch_of(other, "layers.0.feed_forward.w1.weight").scale, 8.0);
    EXPECT_EQ(patch_of(other, "layers.1.feed_forward.w1.weight").scale, 4.0);
    // A pattern matches whole components from the end: "(.*\.)?(q)$" does not match "layers.1.attention.to_q", which
    // keeps the default rank 4 while its factors have rank 8.
    f.meta = {
        {"lora_adapter_metadata", R"({"r": 4, "lora_alpha": 4, "rank_pattern": {"to_k": 2, "^layers.1.attention.to_q": 8, "q": 8}})"}};
    EXPECT_EQ(patch_of(f.plan(), "layers.1.attention.to_q.weight").scale, 0.5);
    f.meta = {{"lora_adapter_metadata", R"({"r": 4, "lora_alpha": 4, "rank_pattern": {"to_k": 2, "q": 8}})"}};
    expect_error(f, Status::kInvalidArgument,
                 {"transformer.layers.1.attention.to_q.lora_A.weight: lora_adapter_metadata gives layers.1.attention.to_q rank 4"});
}

TEST(LoraKeys, MetadataThatDoesNotFit) {
    File f;
    f.peft("transformer.", "layers.0.attention.to_q", 4);
    f.meta = {{"lora_adapter_metadata", R"({"transformer.r": 8, "transformer.lora_alpha": 8})"}};
    expect_error(f, Status::kInvalidArgument,
                 {"transformer.layers.0.attention.to_q.lora_A.weight", "gives layers.0.attention.to_q rank 8", "rank 4"});
    f.meta = {{"lora_adapter_metadata", R"({"transformer.r": 4, "transformer.rank_pattern": {"to_q": 2}})"}};
    expect_error(f, Status::kInvalidArgument, {"rank 2 but the factors have rank 4"});
    f.meta = {{"lora_adapter_metadata", R"({"transformer.r": 4,)"}};
    expect_error(f, Status::kModelFormat, {"lora_adapter_metadata", "syntax error"});
    f.meta = {{"lora_adapter_metadata", R"({"r": 4, "r": 4})"}};
    expect_error(f, Status::kModelFormat, {"duplicate key \"r\""});
    f.meta = {{"lora_adapter_metadata", R"([4])"}};
    expect_error(f, Status::kModelFormat, {"not a JSON object"});
    f.meta = {{"lora_adapter_metadata", R"({"transformer.r": "4"})"}};
    expect_error(f, Status::kModelFormat, {"\"transformer.r\" must be a positive integer"});
    f.meta = {{"lora_adapter_metadata", R"({"transformer.r": 0})"}};
    expect_error(f, Status::kModelFormat, {"\"transformer.r\" must be a positive integer"});
    f.meta = {{"lora_adapter_metadata", R"({"transformer.lora_alpha": true})"}};
    expect_error(f, Status::kModelFormat, {"\"transformer.lora_alpha\" must be a number"});
    f.meta = {{"lora_adapter_metadata", R"({"transformer.use_rslora": 1})"}};
    expect_error(f, Status::kModelFormat, {"\"transformer.use_rslora\" must be true or false"});
    f.meta = {{"lora_adapter_metadata", R"({"transformer.rank_pattern": [1]})"}};
    expect_error(f, Status::kModelFormat, {"\"transformer.rank_pattern\" must be an object"});
    f.meta = {{"lora_adapter_metadata", R"({"transformer.rank_pattern": {"layers\\.[01]\\.attention": 4}})"}};
    expect_error(f, Status::kUnsupported, {"pattern \"layers\\.[01]\\.attention\" uses regular-expression syntax"});
    f.meta = {{"lora_adapter_metadata", R"({"transformer.use_dora": true, "transformer.r": 4})"}};
    expect_error(f, Status::kUnsupported, {"use_dora", "DoRA"});
    std::string many = R"({"transformer.r": 4, "transformer.rank_pattern": {)";
    for (size_t i = 0; i <= cn::format::kMaxLoraPatternEntries; ++i) many += (i ? ",\"m" : "\"m") + std::to_string(i) + "\": 4";
    f.meta = {{"lora_adapter_metadata", many + "}}"}};
    expect_error(f, Status::kModelFormat, {"\"transformer.rank_pattern\" has 513 entries; the limit is 512"});
    f.meta = {{"lora_adapter_metadata", R"({"alpha_pattern": {")" + std::string(cn::format::kMaxLoraPatternBytes + 1, 'a') + R"(": 4}})"}};
    expect_error(f, Status::kModelFormat, {"\"alpha_pattern\": a pattern of 257 bytes exceeds the limit of 256"});
    // Fields of another component only: nothing scales the transformer (and diffusers' pipeline would not read them).
    f.meta = {{"lora_adapter_metadata", R"({"text_encoder.r": 64, "text_encoder.lora_alpha": 1})"}};
    EXPECT_EQ(patch_of(f.plan(), "layers.0.attention.to_q.weight").scale, 1.0);
}

// A kohya alpha next to a PEFT config multiplies (diffusers folds the alpha into the factors, then PEFT scales).
TEST(LoraKeys, KohyaAlphaAndMetadataMultiply) {
    File f;
    f.peft("diffusion_model.", "layers.0.attention.to_q", 4).alpha("diffusion_model.layers.0.attention.to_q", 2);
    f.meta = {{"lora_adapter_metadata", R"({"transformer.r": 4, "transformer.lora_alpha": 12})"}};
    EXPECT_EQ(patch_of(f.plan(), "layers.0.attention.to_q.weight").scale, 0.5 * 3.0);
}

// ---- Refusals ---------------------------------------------------------------------------------------------------------

TEST(LoraKeys, AdapterKindsCutenativeRefuses) {
    struct Row {
        std::string key;
        std::vector<std::string> say;
    } rows[] = {
        {"lora_unet_layers_0_attention_to_q.dora_scale", {"DoRA adapter (dora_scale)", "rather than run it as plain LoRA"}},
        {"transformer.layers.0.attention.to_q.lora_magnitude_vector.weight", {"DoRA adapter (lora_magnitude_vector)"}},
        {"diffusion_model.layers.0.attention.to_q.lokr_w1", {"LoKr"}},
        {"lycoris_layers_0_attention_to_q.lokr_w2_a", {"LoKr"}},
        {"lycoris_layers_0_attention_to_q.hada_w1_a", {"LoHa"}},
        {"lycoris_layers_0_attention_to_q.oft_blocks", {"OFT"}},
        {"diffusion_model.layers.0.attention.to_q.diff", {"full weight-difference patch"}},
        {"diffusion_model.layers.0.attention.to_q.diff_b", {"full weight-difference patch"}},
        {"lora_unet_layers_0_attention_to_q.lora_mid.weight", {"lora_mid"}},
        {"transformer.layers.0.attention.to_q.lora_B.bias", {"LoRA bias"}},
        {"lora_te1_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", {"text-encoder"}},
    };
    for (const Row& row : rows) {
        SCOPED_TRACE(row.key);
        File f;
        f.kohya("lora_unet_layers_0_attention_to_q", 4, D, D);  // an ordinary module next to it
        f.raw({row.key, DType::kBF16, {4, D}, std::nullopt});
        f.raw({"zzz_not_an_adapter_tensor", DType::kF32, {1}, 1.0});  // reported after the refusal, never before
        std::vector<std::string> say = row.say;
        say.insert(say.begin(), row.key + ": ");
        say.push_back("refuses the file");
        expect_error(f, Status::kUnsupported, say);
    }
    File f8;
    f8.peft("transformer.", "layers.0.attention.to_q", 4);
    f8.tensors[0].dtype = DType::kF8E4M3;
    expect_error(f8, Status::kUnsupported, {"transformer.layers.0.attention.to_q.lora_A.weight: factor of dtype F8_E4M3"});
    File i8;
    i8.peft("transformer.", "layers.0.attention.to_q", 4);
    i8.tensors[1].dtype = DType::kI8;
    expect_error(i8, Status::kUnsupported, {"transformer.layers.0.attention.to_q.lora_B.weight: factor of dtype I8"});
}

TEST(LoraKeys, KeysThatFitNothing) {
    // A module of another model (SDXL), a norm (musubi's Comfy export's k_norm), a base weight, a stray tensor.
    File sdxl;
    sdxl.kohya("lora_unet_layers_0_attention_to_q", 4, D, D)
        .kohya("lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q", 4, 640, 640);
    expect_error(sdxl, Status::kInvalidArgument,
                 {"lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q.lora_down.weight: module "
                  "\"lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q\" is no weight of this model"});
    File norm;
    norm.kohya("lora_unet_layers_0_attention_k_norm", 4, 16, 16);
    expect_error(norm, Status::kInvalidArgument, {"lora_unet_layers_0_attention_k_norm.lora_down.weight", "is no weight of this model"});
    File base;
    base.peft("transformer.", "layers.0.attention.to_q", 4)
        .raw({"transformer.layers.0.attention.to_q.weight", DType::kBF16, {D, D}, std::nullopt});
    expect_error(base, Status::kInvalidArgument, {"transformer.layers.0.attention.to_q.weight: not a LoRA tensor"});
    File empty;
    expect_error(empty, Status::kInvalidArgument, {"holds no LoRA tensors: the adapter patches nothing"});
    // diffusers' own "over-split" spelling is not a file format: refused rather than guessed.
    File oversplit;
    oversplit.peft("", "layers.0.attention.to_q", 4, ".lora.down.weight", ".lora.up.weight");
    oversplit.tensors[0].name = "layers.0.attention.to.q.lora.down.weight";
    oversplit.tensors[1].name = "layers.0.attention.to.q.lora.up.weight";
    expect_error(oversplit, Status::kInvalidArgument, {"layers.0.attention.to.q.lora.down.weight", "is no weight of this model"});
}

TEST(LoraKeys, IncompletePairsAndAlphas) {
    File no_up;
    no_up.peft("transformer.", "layers.0.attention.to_q", 4);
    no_up.tensors.pop_back();
    expect_error(
        no_up, Status::kInvalidArgument,
        {"transformer.layers.0.attention.to_q.lora_A.weight: module \"transformer.layers.0.attention.to_q\" has a down matrix but no up "
         "matrix"});
    File no_down;
    no_down.kohya("lora_unet_layers_0_attention_to_q", 4, D, D);
    no_down.tensors.erase(no_down.tensors.begin());
    expect_error(no_down, Status::kInvalidArgument,
                 {"lora_unet_layers_0_attention_to_q.lora_up.weight", "has an up matrix but no down matrix"});
    File lone_alpha;
    lone_alpha.kohya("lora_unet_layers_0_attention_to_q", 4, D, D).alpha("lora_unet_layers_0_attention_to_k", 4);
    expect_error(lone_alpha, Status::kInvalidArgument, {"lora_unet_layers_0_attention_to_k.alpha: an alpha for module", "no LoRA factors"});
    File twice;
    twice.peft("", "layers.0.attention.to_q", 4).peft("", "layers.0.attention.to_q", 4, ".lora_A", ".lora_B");
    twice.tensors.resize(3);  // lora_A.weight, lora_B.weight and a bare lora_A: two down matrices for one module
    expect_error(twice, Status::kInvalidArgument,
                 {"layers.0.attention.to_q.lora_A.weight: the same factor as \"layers.0.attention.to_q.lora_A\""});
    File mixed;
    mixed.pair("layers.0.attention.to_q", ".lora_A.weight", ".lora_up.weight", 4, D, D);
    expect_error(mixed, Status::kInvalidArgument, {"layers.0.attention.to_q.lora_up.weight: its down matrix", "follows another naming"});
}

TEST(LoraKeys, ShapesThatDoNotFit) {
    const std::string s = "transformer.layers.0.feed_forward.w2";
    auto file = [&](std::vector<int64_t> down, std::vector<int64_t> up) {
        File f;
        f.raw({s + ".lora_A.weight", DType::kF32, down, std::nullopt}).raw({s + ".lora_B.weight", DType::kF32, up, std::nullopt});
        return f;
    };
    expect_error(file({0, F}, {D, 0}), Status::kInvalidArgument, {s + ".lora_A.weight: rank 0"});
    expect_error(file({4, D}, {D, 4}), Status::kInvalidArgument,
                 {s + ".lora_A.weight: shape [4, 32] does not fit layers.0.feed_forward.w2, which takes 64 inputs"});
    expect_error(file({4, F}, {F, 4}), Status::kInvalidArgument,
                 {s + ".lora_B.weight: shape [64, 4] does not fit layers.0.feed_forward.w2, which has 32 outputs"});
    expect_error(file({4, F}, {D, 8}), Status::kInvalidArgument, {s + ".lora_B.weight: shape [32, 8]: its rank differs"});
    expect_error(file({4, F, 1, 1}, {D, 4, 1, 1}), Status::kInvalidArgument, {s + ".lora_A.weight: a down matrix must be 2-D"});
    expect_error(file({4, F}, {D * 4}), Status::kInvalidArgument, {s + ".lora_B.weight: an up matrix must be 2-D"});
    File nan_alpha = file({4, F}, {D, 4});
    nan_alpha.alpha(s, std::nan(""));
    expect_error(nan_alpha, Status::kInvalidArgument, {s + ".alpha: alpha is not finite"});
    File wide_alpha = file({4, F}, {D, 4});
    wide_alpha.raw({s + ".alpha", DType::kF32, {2}, std::nullopt});
    expect_error(wide_alpha, Status::kInvalidArgument, {s + ".alpha: an alpha must hold one number; this one has shape [2]"});
    File unread_alpha = file({4, F}, {D, 4});
    unread_alpha.raw({s + ".alpha", DType::kF32, {1}, std::nullopt});
    expect_error(unread_alpha, Status::kInvalidArgument, {s + ".alpha: the alpha's value was not read"});
    File one_alpha = file({4, F}, {D, 4});
    one_alpha.raw({s + ".alpha", DType::kBF16, {1, 1}, 2.0});
    EXPECT_EQ(one_alpha.plan().patches.at(0).scale, 0.5);
}

// ---- Target side ------------------------------------------------------------------------------------------------------

// A model that stores the original fused qkv [3D, D] and original names (zimage_speed.md §4): split to_q / to_k /
// to_v deltas land in its row thirds, a fused qkv delta covers it whole (the two together are the same conflict as
// above), diffusers' to_out.0 is its attention.out.
TEST(LoraKeys, FusedQkvTarget) {
    const std::vector<LoraTargetInfo> targets = {{"layers.0.attention.qkv.weight", 3 * D, D}, {"layers.0.attention.out.weight", D, D}};
    File f;
    f.pair("transformer.layers.0.attention.to_k", ".lora_A.weight", ".lora_B.weight", 4, D, D);
    f.pair("transformer.layers.0.attention.to_v", ".lora_A.weight", ".lora_B.weight", 4, D, D);
    f.pair("lora_unet_layers_0_attention_to_out_0", ".lora_down.weight", ".lora_up.weight", 4, D, D);
    const std::string k = "transformer.layers.0.attention.to_k", v = "transformer.layers.0.attention.to_v",
                      o = "lora_unet_layers_0_attention_to_out_0";
    const LoraPlan plan = f.plan(targets);
    ASSERT_EQ(plan.patches.size(), 3u);
    const LoraPatch& pk = plan.patches[1];
    const LoraPatch& pv = plan.patches[2];
    EXPECT_EQ(plan.patches[0].target, "layers.0.attention.out.weight");
    EXPECT_EQ(plan.patches[0].source, o);
    EXPECT_EQ(plan.patches[0].rows, D);
    EXPECT_EQ(pk.target, "layers.0.attention.qkv.weight");
    EXPECT_EQ(pk.row_begin, D);
    EXPECT_EQ(pk.rows, D);
    EXPECT_EQ(pk.up_row_begin, 0);
    EXPECT_EQ(pk.source, k);
    EXPECT_EQ(pv.row_begin, 2 * D);
    EXPECT_EQ(pv.source, v);
    File whole_qkv;
    whole_qkv.pair("diffusion_model.layers.0.attention.qkv", ".lora_A.weight", ".lora_B.weight", 4, D, 3 * D);
    const LoraPlan wp = whole_qkv.plan(targets);
    ASSERT_EQ(wp.patches.size(), 1u);
    EXPECT_EQ(wp.patches[0].row_begin, 0);
    EXPECT_EQ(wp.patches[0].rows, 3 * D);
    whole_qkv.pair("transformer.layers.0.attention.to_q", ".lora_A.weight", ".lora_B.weight", 4, D, D);
    expect_error([&] { whole_qkv.plan(targets); }, Status::kInvalidArgument, {"patches layers.0.attention.qkv.weight", "twice"});
}

TEST(LoraKeys, CallerBugsInTargets) {
    File f;
    f.peft("", "layers.0.attention.to_q", 4);
    auto targets = tiny_targets();
    targets.push_back(targets.back());
    expect_error([&] { f.plan(targets); }, Status::kInternal, {"listed twice"});
    targets = tiny_targets();
    targets[0].in = 0;
    expect_error([&] { f.plan(targets); }, Status::kInternal, {"all_x_embedder.2-1.weight: adapter target with shape [32, 0]"});
}

// The plan does not depend on the order of the file's header, and its patches come sorted.
TEST(LoraKeys, DeterministicOrder) {
    File f;
    f.kohya("lora_unet_layers_1_attention_qkv", 4, D, 3 * D).kohya("lora_unet_layers_0_feed_forward_w2", 4, F, D);
    f.kohya("lora_unet_context_refiner_0_attention_to_out_0", 4, D, D).alpha("lora_unet_layers_0_feed_forward_w2", 2);
    const LoraPlan ref = f.plan();
    ASSERT_EQ(ref.patches.size(), 5u);
    for (size_t i = 1; i < ref.patches.size(); ++i) EXPECT_LT(ref.patches[i - 1].target, ref.patches[i].target);
    std::mt19937 rng(7);
    for (int trial = 0; trial < 20; ++trial) {
        std::shuffle(f.tensors.begin(), f.tensors.end(), rng);
        const LoraPlan p = f.plan();
        ASSERT_EQ(p.patches.size(), ref.patches.size());
        for (size_t i = 0; i < p.patches.size(); ++i) {
            EXPECT_EQ(p.patches[i].target, ref.patches[i].target);
            EXPECT_EQ(p.patches[i].up_row_begin, ref.patches[i].up_row_begin);
            EXPECT_EQ(p.patches[i].scale, ref.patches[i].scale);
        }
        EXPECT_EQ(p.family, ref.family);
    }
}

// Random edits of valid files (names cut or spliced, shapes changed, alphas broken, metadata mangled): the
// planner answers with a plan that keeps its promises or with a cn::Error, never anything else.
TEST(LoraKeys, RandomEditsKeepThePromises) {
    const auto targets = tiny_targets();
    std::map<std::string, const LoraTargetInfo*> by_name;
    for (const auto& t : targets) by_name[t.name] = &t;
    File seed;
    seed.kohya("lora_unet_layers_1_attention_qkv", 6, D, 3 * D).alpha("lora_unet_layers_1_attention_qkv", 3);
    seed.peft("transformer.", "layers.0.feed_forward.w2", 4).peft("diffusion_model.", "noise_refiner.0.adaLN_modulation.0", 2);
    seed.peft("", "context_refiner.0.attention.to_v", 4, ".lora_A.default.weight", ".lora_B.default.weight");
    seed.pair("diffusion_model.final_layer.linear", ".lora_A.weight", ".lora_B.weight", 2, D, kPatch);
    const std::vector<std::string> pieces = {".",          "_",   "lora_",    "qkv", "to_q", ".alpha", "transformer.",
                                             "lora_unet_", "2-1", "default.", "0"};
    const std::vector<std::string> metas = {R"({"r": 4, "lora_alpha": 2})",
                                            R"({"transformer.rank_pattern": {"qkv": 6, "w2": 4}, "transformer.r": 2})",
                                            R"({"rank_pattern": {".*": 4}, "alpha_pattern": {"\\d+\\.attention.to_.": 3}})",
                                            "{",
                                            "[]",
                                            ""};
    std::mt19937 rng(1234);
    int plans = 0, errors = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        File f = seed;
        const int edits = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < edits; ++e) {
            LoraTensorInfo& t = f.tensors[rng() % f.tensors.size()];
            switch (rng() % 6) {
                case 0: t.name = t.name.substr(0, rng() % (t.name.size() + 1)); break;
                case 1: t.name.insert(rng() % (t.name.size() + 1), pieces[rng() % pieces.size()]); break;
                case 2:
                    if (!t.shape.empty()) t.shape[rng() % t.shape.size()] = static_cast<int64_t>(rng() % 100) - 1;
                    break;
                case 3:
                    t.scalar = (rng() % 2) ? std::optional<double>(std::nan("")) : std::optional<double>(static_cast<double>(rng() % 9));
                    break;
                case 4: f.meta["lora_adapter_metadata"] = metas[rng() % metas.size()]; break;
                case 5: f.tensors.erase(f.tensors.begin() + static_cast<long>(rng() % f.tensors.size())); break;
            }
            if (f.tensors.empty()) break;
        }
        try {
            const LoraPlan p = f.plan();
            ++plans;
            ASSERT_FALSE(p.patches.empty());
            for (size_t i = 0; i < p.patches.size(); ++i) {
                const LoraPatch& q = p.patches[i];
                ASSERT_TRUE(by_name.count(q.target)) << q.target;
                const LoraTargetInfo& t = *by_name[q.target];
                EXPECT_GE(q.row_begin, 0);
                EXPECT_LE(q.row_begin + q.rows, t.out);
                EXPECT_GT(q.rank, 0);
                EXPECT_TRUE(std::isfinite(q.scale));
                const LoraTensorInfo *down = nullptr, *up = nullptr;
                for (const auto& x : f.tensors) {
                    if (x.name == q.down) down = &x;
                    if (x.name == q.up) up = &x;
                }
                ASSERT_TRUE(down && up);
                EXPECT_EQ(down->shape, (std::vector<int64_t>{q.rank, t.in}));
                ASSERT_EQ(up->shape.size(), 2u);
                EXPECT_GE(up->shape[0], q.up_row_begin + q.rows);
                EXPECT_EQ(up->shape[1], q.rank);
                if (i > 0) {
                    const LoraPatch& prev = p.patches[i - 1];
                    EXPECT_TRUE(prev.target < q.target || (prev.target == q.target && prev.row_begin + prev.rows <= q.row_begin));
                }
            }
        } catch (const cn::Error& e) {
            ++errors;
            EXPECT_EQ(e.message().rfind(std::string(kLabel) + ": ", 0), 0u) << e.message();
        }
    }
    EXPECT_GT(plans, 100);
    EXPECT_GT(errors, 100);
}
