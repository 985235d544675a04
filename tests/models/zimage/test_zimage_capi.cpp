// Z-Image through the public C ABI on the tiny fixture pipelines: the image equals the reference's RGB8 (within
// 1 level on >= 99.9 % of values), the same seed gives the same bytes, model info and describe report the kind
// and defaults, bad requests are INVALID_ARGUMENT / UNSUPPORTED with a message and leave the model usable,
// progress counts denoising steps, cancellation between steps is CANCELLED and leaves `out` untouched, and bad
// directories are MODEL_FORMAT naming the component and field.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "capi/include/cutenative.h"
#include "tests/models/zimage/zimage_fixture.h"

namespace {

struct Err {
    cn_error* e = nullptr;
    Err() { cn_error_create(&e); }
    ~Err() { cn_error_free(e); }
    std::string msg() const { return cn_error_message(e); }
};

struct Req {
    cn_generate_request* r = nullptr;
    Req() { cn_generate_request_create(&r, nullptr); }
    ~Req() { cn_generate_request_free(r); }
};

struct Opts {
    cn_run_options* o = nullptr;
    Opts() { cn_run_options_create(&o, nullptr); }
    ~Opts() { cn_run_options_free(o); }
};

cn_model* load(const std::string& config) {
    static std::map<std::string, cn_model*> models;  // kept for the process (freed at exit by the OS)
    auto it = models.find(config);
    if (it != models.end()) return it->second;
    Err err;
    cn_model* m = nullptr;
    EXPECT_EQ(cn_model_create(cn::test::zimage_pipeline_dir(config).c_str(), nullptr, &m, err.e), CN_STATUS_OK) << err.msg();
    models[config] = m;
    return m;
}

// Sets `req` to fixture case `c` (and the options' seed).
void set_case(const nlohmann::json& c, cn_generate_request* req, cn_run_options* opts) {
    const std::string prompt = c["prompt"];
    const std::string neg = c["negative_prompt"].is_null() ? "" : c["negative_prompt"].get<std::string>();
    ASSERT_EQ(cn_generate_request_set_prompt(req, prompt.c_str(), c["negative_prompt"].is_null() ? nullptr : neg.c_str(), nullptr),
              CN_STATUS_OK);
    ASSERT_EQ(cn_generate_request_set_size(req, c["width"], c["height"], nullptr), CN_STATUS_OK);
    ASSERT_EQ(cn_generate_request_set_steps(req, c["steps"], c["guidance"].get<float>(), nullptr), CN_STATUS_OK);
    const auto& n = c["cfg_normalization"];
    const double norm = n.is_boolean() ? (n.get<bool>() ? 1.0 : 0.0) : n.get<double>();
    ASSERT_EQ(cn_generate_request_set_cfg(req, c["cfg_truncation"].get<double>(), norm, nullptr), CN_STATUS_OK);
    ASSERT_EQ(cn_run_options_set_seed(opts, c["seed"].get<uint64_t>(), nullptr), CN_STATUS_OK);
}

std::vector<uint8_t> generate(cn_model* m, cn_generate_request* req, cn_run_options* opts, cn_status want = CN_STATUS_OK) {
    Err err;
    size_t bytes = 0;
    EXPECT_EQ(cn_generate_get_size(m, req, &bytes, err.e), CN_STATUS_OK) << err.msg();
    std::vector<uint8_t> out(bytes, 0xAB);
    EXPECT_EQ(cn_generate(m, req, opts, out.data(), out.size(), err.e), want) << err.msg();
    return out;
}

std::vector<uint8_t> reference_image(const nlohmann::json& c) {
    std::string dtype;
    std::vector<int64_t> shape;
    auto img = cn::test::read_safetensor(cn::test::zimage_fixtures() + "/reference/" + c["config"].get<std::string>() + ".safetensors",
                                         c["name"].get<std::string>() + ".image", &dtype, &shape);
    EXPECT_EQ(dtype, "U8");
    EXPECT_EQ(shape, (std::vector<int64_t>{c["height"], c["width"], 3}));
    return img;
}

class ZImageCapi : public ::testing::Test {
protected:
    void SetUp() override { CN_REQUIRE_ZIMAGE_TOKENIZER(); }
};

TEST_F(ZImageCapi, EveryFixtureCaseMatchesTheReferenceImage) {
    for (const auto& c : cn::test::zimage_cases()["cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        cn_model* m = load(c["config"]);
        ASSERT_NE(m, nullptr);
        Req req;
        Opts opts;
        set_case(c, req.r, opts.o);
        const std::vector<uint8_t> got = generate(m, req.r, opts.o);
        const std::vector<uint8_t> ref = reference_image(c);
        ASSERT_EQ(got.size(), ref.size());
        size_t off = 0;
        for (size_t i = 0; i < got.size(); ++i) off += std::abs(int(got[i]) - int(ref[i])) > 1;
        EXPECT_LE(static_cast<double>(off), 0.001 * static_cast<double>(got.size()));
        uint64_t done = 0, total = 0;
        ASSERT_EQ(cn_run_options_get_progress(opts.o, &done, &total, nullptr), CN_STATUS_OK);
        EXPECT_EQ(total, c["steps"].get<uint64_t>());
        EXPECT_EQ(done, total);
        // Where the call's time went: every phase Z-Image has ran, none is negative, and they fit in the call.
        cn_call_timings t;
        cn_call_timings_init(&t);
        ASSERT_EQ(cn_run_options_get_timings(opts.o, &t, nullptr), CN_STATUS_OK);
        EXPECT_GT(t.text_ms, 0.0);
        EXPECT_GT(t.denoise_ms, 0.0);
        EXPECT_GT(t.decode_ms, 0.0);
        EXPECT_GE(t.prepare_ms, 0.0);
        EXPECT_GE(t.adapters_ms, 0.0);
        EXPECT_LE(t.prepare_ms + t.adapters_ms + t.text_ms + t.denoise_ms + t.decode_ms, t.total_ms);
    }
}

TEST_F(ZImageCapi, SameSeedSameBytesOtherSeedOtherImage) {
    const auto& c = cn::test::zimage_case("a_turbo_32x48");
    cn_model* m = load("tiny_a");
    Req req;
    Opts opts;
    set_case(c, req.r, opts.o);
    const auto a = generate(m, req.r, opts.o);
    const auto b = generate(m, req.r, opts.o);
    EXPECT_EQ(a, b);
    cn_run_options_set_seed(opts.o, 1, nullptr);
    EXPECT_NE(generate(m, req.r, opts.o), a);
}

// Several images in one call: image i is the one-image call's with seed + i (on these fp32 CPU fixtures the batched
// GEMMs may round rows differently: within one pixel level on >= 99.9 % of values, as the reference comparison),
// with CFG too (the batch is [n positive, n negative]), in eager and fused mode; the count is bounded.
TEST_F(ZImageCapi, SeveralImagesPerCallAreTheOneImageCallsOfSeedPlusI) {
    cn_model* m = load("tiny_a");
    for (const char* name : {"a_turbo_32x48", "a_cfg_trunc_norm_mask"}) {
        for (cn_mode mode : {CN_MODE_EAGER, CN_MODE_FUSED}) {
            SCOPED_TRACE(std::string(name) + (mode == CN_MODE_FUSED ? " fused" : " eager"));
            ASSERT_EQ(cn_model_set_mode(m, mode, nullptr), CN_STATUS_OK);
            const auto& c = cn::test::zimage_case(name);
            Req req;
            Opts opts;
            set_case(c, req.r, opts.o);
            const uint64_t seed = c["seed"].get<uint64_t>();
            std::vector<std::vector<uint8_t>> singles;
            for (uint64_t i = 0; i < 3; ++i) {
                ASSERT_EQ(cn_run_options_set_seed(opts.o, seed + i, nullptr), CN_STATUS_OK);
                singles.push_back(generate(m, req.r, opts.o));
            }
            ASSERT_EQ(cn_run_options_set_seed(opts.o, seed, nullptr), CN_STATUS_OK);
            ASSERT_EQ(cn_generate_request_set_count(req.r, 3, nullptr), CN_STATUS_OK);
            const std::vector<uint8_t> all = generate(m, req.r, opts.o);
            ASSERT_EQ(all.size(), 3 * singles[0].size());
            for (size_t i = 0; i < 3; ++i) {
                const uint8_t* p = all.data() + i * singles[0].size();
                size_t off = 0;
                int worst = 0;
                for (size_t k = 0; k < singles[i].size(); ++k) {
                    const int d = std::abs(static_cast<int>(p[k]) - static_cast<int>(singles[i][k]));
                    off += d > 1;
                    worst = std::max(worst, d);
                }
                EXPECT_LE(static_cast<double>(off), 0.001 * static_cast<double>(singles[i].size()))
                    << "image " << i << ", largest " << worst;
                if (i > 0) EXPECT_NE(singles[i], singles[0]) << "image " << i << " repeats image 0";
            }
        }
    }
    ASSERT_EQ(cn_model_set_mode(m, CN_MODE_EAGER, nullptr), CN_STATUS_OK);
    Req req;
    Err err;
    EXPECT_EQ(cn_generate_request_set_count(req.r, 0, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("count"), std::string::npos) << err.msg();
    EXPECT_EQ(cn_generate_request_set_count(req.r, CN_GENERATE_MAX_COUNT + 1, nullptr), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate_request_set_count(req.r, CN_GENERATE_MAX_COUNT, nullptr), CN_STATUS_OK);
}

TEST_F(ZImageCapi, InfoAndDescribeReportKindAndDefaults) {
    for (auto [config, multiple] : {std::pair{"tiny_a", 16}, std::pair{"tiny_b", 8}}) {
        cn_model* m = load(config);
        cn_model_info info;
        cn_model_info_init(&info);
        ASSERT_EQ(cn_model_get_info(m, &info, nullptr), CN_STATUS_OK);
        EXPECT_EQ(info.kind, CN_MODEL_KIND_ZIMAGE);
        EXPECT_EQ(info.image_size_multiple, multiple) << config;
        EXPECT_EQ(info.default_steps, 8);
        EXPECT_EQ(info.default_guidance, 0.0f);
        EXPECT_EQ(info.max_tokens, 512);
        EXPECT_GT(info.n_parameters, 0u);
        // A caller built against ABI 0.2 passes the older, smaller struct: it is filled up to its size only.
        struct {
            cn_model_info info;
            unsigned char guard[64];
        } old;
        std::memset(&old, 0x5A, sizeof(old));
        old.info.struct_size = offsetof(cn_model_info, image_size_multiple);
        ASSERT_EQ(cn_model_get_info(m, &old.info, nullptr), CN_STATUS_OK);
        EXPECT_EQ(old.info.kind, CN_MODEL_KIND_ZIMAGE);
        EXPECT_EQ(old.info.max_tokens, 512);
        const auto* tail = reinterpret_cast<const unsigned char*>(&old.info) + offsetof(cn_model_info, image_size_multiple);
        for (size_t i = 0; i < sizeof(cn_model_info) - offsetof(cn_model_info, image_size_multiple); ++i) ASSERT_EQ(tail[i], 0x5A);
        size_t size = 0;
        ASSERT_EQ(cn_model_describe(m, nullptr, 0, &size, nullptr), CN_STATUS_OK);
        std::string buf(size, '\0');
        ASSERT_EQ(cn_model_describe(m, buf.data(), buf.size(), &size, nullptr), CN_STATUS_OK);
        const auto j = nlohmann::json::parse(buf.c_str());
        EXPECT_EQ(j["kind"], "zimage");
        EXPECT_EQ(j["default_steps"], 8);
        EXPECT_EQ(j["image_size_multiple"], multiple);
        EXPECT_TRUE(j["config"].contains("transformer"));
    }
}

TEST_F(ZImageCapi, DefaultsAreTheTurboRecipe) {
    cn_model* m = load("tiny_b");
    Req req;
    Opts opts;
    ASSERT_EQ(cn_generate_request_set_prompt(req.r, "a lighthouse", nullptr, nullptr), CN_STATUS_OK);
    ASSERT_EQ(cn_generate_request_set_size(req.r, 16, 8, nullptr), CN_STATUS_OK);
    // Steps and guidance left at their defaults: 8 steps, guidance 0 (one transformer pass per step).
    const auto def = generate(m, req.r, opts.o);
    uint64_t done = 0, total = 0;
    cn_run_options_get_progress(opts.o, &done, &total, nullptr);
    EXPECT_EQ(total, 8u);
    ASSERT_EQ(cn_generate_request_set_steps(req.r, 8, 0.0f, nullptr), CN_STATUS_OK);
    EXPECT_EQ(generate(m, req.r, opts.o), def);
    ASSERT_EQ(cn_generate_request_set_steps(req.r, CN_GENERATE_DEFAULT_STEPS, CN_GENERATE_DEFAULT_GUIDANCE, nullptr), CN_STATUS_OK);
    EXPECT_EQ(generate(m, req.r, opts.o), def);
    // Guidance 1 is not "off": pos + 1 * (pos - neg) gives another image.
    ASSERT_EQ(cn_generate_request_set_steps(req.r, 8, 1.0f, nullptr), CN_STATUS_OK);
    EXPECT_NE(generate(m, req.r, opts.o), def);
}

TEST_F(ZImageCapi, BadRequestsAreInvalidAndTheModelStaysUsable) {
    cn_model* m = load("tiny_a");
    const auto& c = cn::test::zimage_case("a_turbo_32x48");
    Req good;
    Opts opts;
    set_case(c, good.r, opts.o);
    const auto ref = generate(m, good.r, opts.o);
    Err err;
    Req req;
    // Setters.
    EXPECT_EQ(cn_generate_request_set_steps(req.r, 0, 0.0f, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("steps"), std::string::npos) << err.msg();
    EXPECT_EQ(cn_generate_request_set_steps(req.r, -5, 0.0f, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate_request_set_steps(req.r, 1001, 0.0f, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate_request_set_steps(req.r, 4, std::nanf(""), err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("guidance"), std::string::npos) << err.msg();
    EXPECT_EQ(cn_generate_request_set_steps(req.r, 4, std::numeric_limits<float>::infinity(), err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate_request_set_cfg(req.r, std::nan(""), 0.0, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate_request_set_cfg(req.r, 1.0, -1.0, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate_request_set_size(req.r, 0, 16, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate_request_set_size(req.r, 16, 4097, err.e), CN_STATUS_INVALID_ARGUMENT);
    const std::string huge(CN_GENERATE_MAX_PROMPT_BYTES + 1, 'a');
    EXPECT_EQ(cn_generate_request_set_prompt(req.r, huge.c_str(), nullptr, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("CN_GENERATE_MAX_PROMPT_BYTES"), std::string::npos) << err.msg();
    EXPECT_EQ(cn_generate_request_set_prompt(req.r, "ok", huge.c_str(), err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate_request_set_prompt(req.r, nullptr, nullptr, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate_request_set_prompt(nullptr, "x", nullptr, err.e), CN_STATUS_INVALID_ARGUMENT);

    // Checked against the model: a size that is not a multiple of 16 (tiny_a's VAE scale 8, times 2).
    ASSERT_EQ(cn_generate_request_set_prompt(req.r, "a fox", nullptr, nullptr), CN_STATUS_OK);
    ASSERT_EQ(cn_generate_request_set_size(req.r, 40, 32, nullptr), CN_STATUS_OK);
    size_t bytes = 0;
    EXPECT_EQ(cn_generate_get_size(m, req.r, &bytes, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("multiple of 16"), std::string::npos) << err.msg();
    std::vector<uint8_t> out(40 * 32 * 3);
    EXPECT_EQ(cn_generate(m, req.r, opts.o, out.data(), out.size(), err.e), CN_STATUS_INVALID_ARGUMENT);
    // Beyond the RoPE position range (tiny_a's axes_lens [544, 16, 16]: at most 16 patch positions, 256 px a side).
    ASSERT_EQ(cn_generate_request_set_size(req.r, 32, 272, nullptr), CN_STATUS_OK);
    EXPECT_EQ(cn_generate_get_size(m, req.r, &bytes, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("height: 272 px is 17 patch positions"), std::string::npos) << err.msg();
    EXPECT_NE(err.msg().find("axes_lens[1]: at most 256 px"), std::string::npos) << err.msg();
    ASSERT_EQ(cn_generate_request_set_size(req.r, 4096, 16, nullptr), CN_STATUS_OK);
    EXPECT_EQ(cn_generate_get_size(m, req.r, &bytes, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("width: 4096 px"), std::string::npos) << err.msg();
    // A prompt beyond tiny_b's caption range (axes_lens[0] = 200): INVALID_ARGUMENT naming it, not an index error.
    {
        cn_model* b = load("tiny_b");
        Req long_prompt;
        std::string words;
        for (int i = 0; i < 300; ++i) words += "fox ";
        ASSERT_EQ(cn_generate_request_set_prompt(long_prompt.r, words.c_str(), nullptr, nullptr), CN_STATUS_OK);
        ASSERT_EQ(cn_generate_request_set_size(long_prompt.r, 16, 16, nullptr), CN_STATUS_OK);
        std::vector<uint8_t> img(16 * 16 * 3);
        EXPECT_EQ(cn_generate(b, long_prompt.r, opts.o, img.data(), img.size(), err.e), CN_STATUS_INVALID_ARGUMENT);
        EXPECT_NE(err.msg().find("prompt: "), std::string::npos) << err.msg();
        EXPECT_NE(err.msg().find("axes_lens[0] = 200"), std::string::npos) << err.msg();
    }
    ASSERT_EQ(cn_generate_request_set_size(req.r, 40, 32, nullptr), CN_STATUS_OK);
    // Invalid UTF-8 in either prompt (negative prompts are encoded only with guidance > 0).
    ASSERT_EQ(cn_generate_request_set_size(req.r, 32, 32, nullptr), CN_STATUS_OK);
    ASSERT_EQ(cn_generate_request_set_prompt(req.r, "bad \xC3\x28 text", nullptr, nullptr), CN_STATUS_OK);
    out.assign(32 * 32 * 3, 0xAB);
    EXPECT_EQ(cn_generate(m, req.r, opts.o, out.data(), out.size(), err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("prompt"), std::string::npos) << err.msg();
    EXPECT_EQ(out, std::vector<uint8_t>(32 * 32 * 3, 0xAB)) << "a failed call wrote into out";
    ASSERT_EQ(cn_generate_request_set_prompt(req.r, "fine", "bad \xFF", nullptr), CN_STATUS_OK);
    ASSERT_EQ(cn_generate_request_set_steps(req.r, 2, 2.0f, nullptr), CN_STATUS_OK);
    EXPECT_EQ(cn_generate(m, req.r, opts.o, out.data(), out.size(), err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("negative_prompt"), std::string::npos) << err.msg();
    // A buffer too small, NULL out, a LoRA adapter file that does not exist, a forecast on an image model.
    ASSERT_EQ(cn_generate_request_set_prompt(req.r, "fine", nullptr, nullptr), CN_STATUS_OK);
    EXPECT_EQ(cn_generate(m, req.r, opts.o, out.data(), out.size() - 1, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(cn_generate(m, req.r, opts.o, nullptr, out.size(), err.e), CN_STATUS_INVALID_ARGUMENT);
    ASSERT_EQ(cn_generate_request_set_lora(req.r, "/nonexistent/style.safetensors", 1.0f, nullptr), CN_STATUS_OK);
    EXPECT_EQ(cn_generate(m, req.r, opts.o, out.data(), out.size(), err.e), CN_STATUS_NOT_FOUND);
    EXPECT_NE(err.msg().find("/nonexistent/style.safetensors"), std::string::npos) << err.msg();
    ASSERT_EQ(cn_generate_request_set_lora(req.r, nullptr, 1.0f, nullptr), CN_STATUS_OK);
    cn_forecast_request* fr = nullptr;
    cn_forecast_request_create(&fr, nullptr);
    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    EXPECT_EQ(cn_forecast_get_shape(m, fr, &shape, err.e), CN_STATUS_UNSUPPORTED);
    cn_forecast_request_free(fr);
    const char* text = "x";
    float emb[4];
    EXPECT_EQ(cn_embed(m, &text, 1, nullptr, emb, 4, err.e), CN_STATUS_UNSUPPORTED);

    // The model is still usable: the good request gives the same image.
    EXPECT_EQ(generate(m, good.r, opts.o), ref);
}

TEST_F(ZImageCapi, CancelBeforeAndBetweenSteps) {
    cn_model* m = load("tiny_a");
    Req req;
    ASSERT_EQ(cn_generate_request_set_prompt(req.r, "a slow painting", nullptr, nullptr), CN_STATUS_OK);
    ASSERT_EQ(cn_generate_request_set_size(req.r, 64, 64, nullptr), CN_STATUS_OK);
    ASSERT_EQ(cn_generate_request_set_steps(req.r, 1000, 0.0f, nullptr), CN_STATUS_OK);
    std::vector<uint8_t> out(64 * 64 * 3, 0xAB);
    Err err;
    {  // cancelled before the call
        Opts opts;
        cn_run_options_cancel(opts.o);
        EXPECT_EQ(cn_generate(m, req.r, opts.o, out.data(), out.size(), err.e), CN_STATUS_CANCELLED);
    }
    {  // cancelled from another thread once two steps are done
        Opts opts;
        std::atomic<bool> stop{false};
        std::thread watcher([&] {
            uint64_t done = 0;
            while (!stop.load()) {
                cn_run_options_get_progress(opts.o, &done, nullptr, nullptr);
                if (done >= 2) {
                    cn_run_options_cancel(opts.o);
                    return;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        });
        EXPECT_EQ(cn_generate(m, req.r, opts.o, out.data(), out.size(), err.e), CN_STATUS_CANCELLED) << err.msg();
        stop = true;
        watcher.join();
        uint64_t done = 0, total = 0;
        cn_run_options_get_progress(opts.o, &done, &total, nullptr);
        EXPECT_EQ(total, 1000u);
        EXPECT_GE(done, 2u);
        EXPECT_LT(done, 1000u);
    }
    {  // a deadline
        Opts opts;
        cn_run_options_set_timeout_ms(opts.o, 50, nullptr);
        EXPECT_EQ(cn_generate(m, req.r, opts.o, out.data(), out.size(), err.e), CN_STATUS_DEADLINE_EXCEEDED) << err.msg();
    }
    EXPECT_EQ(out, std::vector<uint8_t>(64 * 64 * 3, 0xAB)) << "a cancelled call wrote into out";
}

// A copy of the tiny_a pipeline directory in which `edit` changes one file; returns its path.
std::string broken_copy(const std::string& tag, const std::function<void(const std::filesystem::path&)>& edit) {
    namespace fs = std::filesystem;
    const fs::path src = cn::test::zimage_pipeline_dir("tiny_a");
    const fs::path dst = fs::temp_directory_path() / ("cn_zimage_broken_" + tag + "_" + std::to_string(::getpid()));
    cn::test::remove_tree(dst.string());
    // A deep copy (symlinks followed): edits must never reach the fixtures the links point to.
    fs::copy(src, dst, fs::copy_options::recursive);
    edit(dst);
    return dst.string();
}

void rewrite_json(const std::filesystem::path& file, const std::function<void(nlohmann::json&)>& edit) {
    namespace fs = std::filesystem;
    nlohmann::json j;
    {
        std::ifstream f(file);
        j = nlohmann::json::parse(f);
    }
    edit(j);
    std::ofstream(file, std::ios::trunc) << j.dump();
}

TEST_F(ZImageCapi, BadDirectoriesNameTheComponentAndField) {
    namespace fs = std::filesystem;
    struct Case {
        std::string tag;
        std::function<void(const fs::path&)> edit;
        cn_status want;
        std::vector<std::string> words;
    };
    const std::vector<Case> cases = {
        {"novae", [](const fs::path& d) { cn::test::remove_tree((d / "vae").string()); }, CN_STATUS_MODEL_FORMAT, {"vae"}},
        {"notok", [](const fs::path& d) { cn::test::remove_tree((d / "tokenizer").string()); }, CN_STATUS_MODEL_FORMAT, {"tokenizer"}},
        {"capdim",
         [](const fs::path& d) { rewrite_json(d / "transformer" / "config.json", [](nlohmann::json& j) { j["cap_feat_dim"] = 7; }); },
         CN_STATUS_MODEL_FORMAT,
         {"cap_feat_dim"}},
        {"axes",
         [](const fs::path& d) { rewrite_json(d / "transformer" / "config.json", [](nlohmann::json& j) { j["axes_dims"][0] = 10; }); },
         CN_STATUS_MODEL_FORMAT,
         {"axes_dims"}},
        {"dynshift",
         [](const fs::path& d) {
             rewrite_json(d / "scheduler" / "scheduler_config.json", [](nlohmann::json& j) { j["use_dynamic_shifting"] = true; });
         },
         CN_STATUS_UNSUPPORTED,
         {"use_dynamic_shifting"}},
        {"pipeline",
         [](const fs::path& d) { rewrite_json(d / "model_index.json", [](nlohmann::json& j) { j["_class_name"] = "FluxPipeline"; }); },
         CN_STATUS_UNSUPPORTED,
         {"FluxPipeline"}},
        {"layers",
         [](const fs::path& d) { rewrite_json(d / "transformer" / "config.json", [](nlohmann::json& j) { j["n_layers"] = 5; }); },
         CN_STATUS_MODEL_FORMAT,
         {"transformer", "layers.2"}},
        {"te_heads",
         [](const fs::path& d) {
             rewrite_json(d / "text_encoder" / "config.json", [](nlohmann::json& j) { j["num_key_value_heads"] = 3; });
         },
         CN_STATUS_MODEL_FORMAT,
         {"num_key_value_heads"}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.tag);
        const std::string dir = broken_copy(c.tag, c.edit);
        Err err;
        cn_model* m = nullptr;
        EXPECT_EQ(cn_model_create(dir.c_str(), nullptr, &m, err.e), c.want) << err.msg();
        EXPECT_EQ(m, nullptr);
        for (const auto& w : c.words) EXPECT_NE(err.msg().find(w), std::string::npos) << err.msg();
        cn::test::remove_tree(dir);
    }
}

}  // namespace

namespace {

TEST_F(ZImageCapi, OffloadTextEncoder) {
    const auto& c = cn::test::zimage_case("a_cfg2p5_neg");
    cn_model_params mp;
    cn_model_params_init(&mp);
    mp.offload = CN_OFFLOAD_TEXT_ENCODER;
    Err err;
    cn_model* m = nullptr;
    ASSERT_EQ(cn_model_create(cn::test::zimage_pipeline_dir("tiny_a").c_str(), &mp, &m, err.e), CN_STATUS_OK) << err.msg();
    Req req;
    Opts opts;
    set_case(c, req.r, opts.o);
    // On a CPU model the offloaded encoder runs where it did anyway: the same image; its weights are host bytes.
    EXPECT_EQ(generate(m, req.r, opts.o), generate(load("tiny_a"), req.r, opts.o));
    cn_model_info with, without;
    cn_model_info_init(&with);
    cn_model_info_init(&without);
    cn_model_get_info(m, &with, nullptr);
    cn_model_get_info(load("tiny_a"), &without, nullptr);
    EXPECT_EQ(with.n_parameters, without.n_parameters);
    EXPECT_LT(with.weight_bytes, without.weight_bytes);
    cn_model_free(m);
    // Unknown flags, and offloading on a model without a text encoder, are refused.
    mp.offload = 2;
    EXPECT_EQ(cn_model_create(cn::test::zimage_pipeline_dir("tiny_a").c_str(), &mp, &m, err.e), CN_STATUS_INVALID_ARGUMENT);
    mp.offload = CN_OFFLOAD_TEXT_ENCODER;
    const std::string chronos = std::string(CN_FIXTURES_DIR) + "/chronos2/tiny_a";
    EXPECT_EQ(cn_model_create(chronos.c_str(), &mp, &m, err.e), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.msg().find("offload"), std::string::npos) << err.msg();
    EXPECT_EQ(m, nullptr);
}

}  // namespace
