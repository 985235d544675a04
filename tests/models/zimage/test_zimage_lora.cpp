// LoRA adapters on the tiny Z-Image pipelines (core/runtime/adapters.h), with adapter files the test writes itself:
// fusing gives W0 + s * alpha / r * B @ A on every target (fp32 here: checked against that formula computed apart),
// restoring gives the loaded weights back bit for bit after 100 alternating switches of four adapters, in place
// (same storage), an image made with an adapter equals the image of a model whose weights were patched by hand, two
// sets used at once each get their own weights, and the refusals name the file and the reason. The published key
// families and their reference images are test_zimage_lora_parity.cpp's.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/models/registry.h"
#include "core/runtime/adapters.h"
#include "core/runtime/model.h"
#include "core/runtime/run_context.h"
#include "tests/models/zimage/zimage_fixture.h"

namespace {

// A safetensors file of F32 tensors (and a __metadata__ object), written for a test.
void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {}) {
    nlohmann::json h = nlohmann::json::object();
    if (!metadata.empty()) h["__metadata__"] = metadata;
    std::string data;
    for (const auto& [name, t0] : tensors) {
        const at::Tensor t = t0.to(at::kFloat).contiguous();
        const uint64_t begin = data.size();
        data.append(reinterpret_cast<const char*>(t.const_data_ptr<float>()), static_cast<size_t>(t.numel()) * 4);
        h[name] = {{"dtype", "F32"}, {"shape", t.sizes().vec()}, {"data_offsets", {begin, data.size()}}};
    }
    const std::string header = h.dump();
    const uint64_t n = header.size();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header << data;
}

struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/cn_lora_XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() { cn::test::remove_tree(path); }
};

cn::Model& model(const std::string& config) {
    static std::map<std::string, std::unique_ptr<cn::Model>> models;
    auto it = models.find(config);
    if (it == models.end()) it = models.emplace(config, cn::load_model(cn::test::zimage_pipeline_dir(config), cn::ModelOptions{})).first;
    return *it->second;
}

// A diffusers/PEFT-named adapter of rank r on `modules` (e.g. "layers.0.attention.to_q"), seeded factors.
struct Written {
    std::string path;
    std::map<std::string, std::pair<at::Tensor, at::Tensor>> factors;  // module -> (A [r, in], B [out, r])
};
Written write_adapter(const std::string& dir, const std::string& name, cn::Model& m, const std::vector<std::string>& modules, int64_t r,
                      uint64_t seed) {
    Written w{dir + "/" + name + ".safetensors", {}};
    at::manual_seed(seed);
    std::map<std::string, at::Tensor> tensors;
    for (const std::string& mod : modules) {
        const auto* e = m.adapter_host()->targets().find(mod + ".weight");
        EXPECT_NE(e, nullptr) << mod;
        const int64_t out = e->tensor.size(0), in = e->tensor.size(1);
        at::Tensor a = at::randn({r, in}) * 0.05, b = at::randn({out, r}) * 0.05;
        tensors["transformer." + mod + ".lora_A.weight"] = a;
        tensors["transformer." + mod + ".lora_B.weight"] = b;
        w.factors[mod] = {a, b};
    }
    write_safetensors(w.path, tensors);
    return w;
}

at::Tensor weight(cn::Model& m, const std::string& module) { return m.adapter_host()->targets().find(module + ".weight")->tensor; }

class ZImageLora : public ::testing::Test {
protected:
    void SetUp() override { CN_REQUIRE_ZIMAGE_TOKENIZER(); }

    // The fixture case a_turbo_32x48 as a request (and its seed in `run`).
    cn::GenerateRequest turbo_request() {
        const auto& c = cn::test::zimage_case("a_turbo_32x48");
        cn::GenerateRequest req;
        req.prompt = c["prompt"].get<std::string>();
        req.width = c["width"];
        req.height = c["height"];
        req.steps = c["steps"];
        req.guidance = c["guidance"].get<float>();
        run.seed = c["seed"].get<uint64_t>();
        return req;
    }

    std::vector<uint8_t> generate(cn::Model& m, const cn::GenerateRequest& r) {
        std::vector<uint8_t> out(m.generate_bytes(r));
        run.begin();
        m.generate(r, run, out.data(), out.size());
        return out;
    }

    // The image of `req` with the adapter's modules patched by hand to W0 + scale * B @ A (through the weight
    // index), then the base weights put back.
    std::vector<uint8_t> by_hand(cn::Model& m, const Written& w, double scale, const cn::GenerateRequest& req) {
        std::map<std::string, at::Tensor> saved;
        for (const auto& [mod, f] : w.factors) {
            at::Tensor wt = weight(m, mod);
            saved[mod] = wt.clone();
            at::Tensor fused = wt.to(at::kFloat, false, true);
            fused.addmm_(f.second, f.first, 1.0, scale);
            wt.copy_(fused);
        }
        std::vector<uint8_t> out = generate(m, req);
        for (const auto& [mod, t] : saved) weight(m, mod).copy_(t);
        return out;
    }

    TempDir dir;
    cn::RunContext run;
};

const std::vector<std::string> kModules = {"layers.0.attention.to_q", "layers.1.feed_forward.w2", "noise_refiner.0.attention.to_out.0",
                                           "context_refiner.0.feed_forward.w1"};

TEST_F(ZImageLora, FuseIsTheFormulaAndRestoreIsBitExactInPlace) {
    cn::Model& m = model("tiny_a");
    cn::AdapterHost& host = *m.adapter_host();
    std::map<std::string, at::Tensor> pristine;
    std::map<std::string, const void*> storage;
    for (const auto& [name, e] : host.targets().entries()) {
        pristine[name] = e.tensor.clone();
        storage[name] = e.tensor.const_data_ptr();
    }
    std::vector<std::shared_ptr<const cn::Adapter>> adapters;
    std::vector<Written> written;
    for (int i = 0; i < 4; ++i) {
        written.push_back(write_adapter(dir.path, "a" + std::to_string(i), m, {kModules[i], kModules[(i + 1) % 4]}, 2 + i, 100 + i));
        adapters.push_back(cn::Adapter::load(written.back().path, {}, host.targets(), m.options().device, &m));
        EXPECT_EQ(adapters.back()->n_targets(), 2u);
    }
    // One adapter at scale 0.7: every target is W0 + 0.7 * B @ A (no alpha: scale 1).
    {
        const auto lease = host.hold({{adapters[0], 0.7f}}, run);
        for (const auto& [mod, f] : written[0].factors) {
            const at::Tensor want = pristine.at(mod + ".weight") + 0.7 * at::mm(f.second, f.first);
            EXPECT_TRUE(weight(m, mod).allclose(want, 1e-6, 1e-7)) << mod;
            EXPECT_FALSE(at::equal(weight(m, mod), pristine.at(mod + ".weight"))) << mod;
        }
    }
    // 100 switches between the four and two at once, then none: the loaded weights, bit for bit, same storage.
    for (int i = 0; i < 100; ++i) {
        std::vector<cn::AdapterUse> set{{adapters[i % 4], 1.0f + 0.25f * static_cast<float>(i % 3)}};
        if (i % 5 == 0) set.push_back({adapters[(i + 2) % 4], -0.5f});
        const auto lease = host.hold(set, run);
    }
    { const auto lease = host.hold({}, run); }
    for (const auto& [name, e] : host.targets().entries()) {
        EXPECT_TRUE(at::equal(e.tensor, pristine.at(name))) << name;
        EXPECT_EQ(e.tensor.const_data_ptr(), storage.at(name)) << name;
    }
    const cn::AdapterHost::Stats s = host.stats();
    EXPECT_GE(s.switches, 101u);
    EXPECT_EQ(s.touched, 0u);
    EXPECT_GT(s.backup_bytes, 0u);
}

// An image made with an adapter equals the image of the same model with its weights patched by hand to the fused
// values (fp32 CPU: the same bits), and differs from the base image; after it, the base image comes back.
TEST_F(ZImageLora, ImageWithAdapterIsTheImageOfThePatchedWeights) {
    cn::Model& m = model("tiny_a");
    const Written w = write_adapter(dir.path, "img", m, {"layers.0.attention.to_q", "layers.1.feed_forward.w1"}, 4, 7);
    const cn::GenerateRequest req = turbo_request();
    const std::vector<uint8_t> base = generate(m, req);
    cn::GenerateRequest with = req;
    with.adapters.push_back({cn::Adapter::load(w.path, {}, m.adapter_host()->targets(), m.options().device, &m), 1.5f});
    const std::vector<uint8_t> adapted = generate(m, with);
    EXPECT_NE(adapted, base);
    EXPECT_EQ(generate(m, req), base);
    EXPECT_EQ(adapted, by_hand(m, w, 1.5, req));
    // set_lora's path: the same adapter read at generation.
    cn::GenerateRequest by_path = req;
    by_path.lora_path = w.path;
    by_path.lora_scale = 1.5f;
    EXPECT_EQ(generate(m, by_path), adapted);
}

// Fused mode computes with q|k|v, w1|w3 and the adaLN projections as single tensors whose row slices the weight
// index holds: an adapter on any of them reaches the fused path (its image differs from the base image, and equals
// the image of the weights patched by hand through the index), and the base image comes back after it.
TEST_F(ZImageLora, AdaptersReachTheFusedPath) {
    cn::Model& m = model("tiny_a");
    m.set_mode(CN_MODE_FUSED);
    struct Back {
        cn::Model& m;
        ~Back() { m.set_mode(CN_MODE_EAGER); }
    } back{m};
    const Written w =
        write_adapter(dir.path, "fused", m, {"layers.0.attention.to_k", "layers.1.feed_forward.w3", "layers.1.adaLN_modulation.0"}, 3, 21);
    const cn::GenerateRequest req = turbo_request();
    const std::vector<uint8_t> base = generate(m, req);
    cn::GenerateRequest with = req;
    with.adapters.push_back({cn::Adapter::load(w.path, {}, m.adapter_host()->targets(), m.options().device, &m), 1.5f});
    const std::vector<uint8_t> adapted = generate(m, with);
    EXPECT_NE(adapted, base);
    EXPECT_EQ(generate(m, req), base);
    EXPECT_EQ(adapted, by_hand(m, w, 1.5, req));
    // One module at a time: each one alone moves the fused image (none of the three is a stale copy).
    for (const auto& [mod, f] : w.factors) {
        at::Tensor wt = weight(m, mod);
        const at::Tensor keep = wt.clone();
        wt.add_(at::mm(f.second, f.first), 1.5);
        EXPECT_NE(generate(m, req), base) << mod << " does not reach the fused path";
        wt.copy_(keep);
    }
    EXPECT_EQ(generate(m, req), base);
}

// Two threads with different adapter sets at once: each image is the one its set gives alone.
TEST_F(ZImageLora, ConcurrentRequestsWithDifferentSetsGetTheirOwnWeights) {
    cn::Model& m = model("tiny_a");
    const Written w1 = write_adapter(dir.path, "c1", m, {"layers.0.attention.to_v"}, 3, 11);
    const Written w2 = write_adapter(dir.path, "c2", m, {"layers.0.attention.to_v", "layers.1.attention.to_k"}, 2, 12);
    const auto& c = cn::test::zimage_case("a_turbo_32x48");
    cn::GenerateRequest req;
    req.prompt = c["prompt"].get<std::string>();
    req.width = c["width"];
    req.height = c["height"];
    req.steps = c["steps"];
    req.guidance = c["guidance"].get<float>();
    std::vector<cn::GenerateRequest> reqs(3, req);
    reqs[1].adapters.push_back({cn::Adapter::load(w1.path, {}, m.adapter_host()->targets(), m.options().device, &m), 2.0f});
    reqs[2].adapters.push_back({cn::Adapter::load(w2.path, {}, m.adapter_host()->targets(), m.options().device, &m), -1.0f});
    const size_t bytes = m.generate_bytes(req);
    auto generate = [&](const cn::GenerateRequest& r) {
        cn::RunContext rc;
        rc.seed = 5;
        rc.begin();
        std::vector<uint8_t> out(bytes);
        m.generate(r, rc, out.data(), out.size());
        return out;
    };
    std::vector<std::vector<uint8_t>> alone;
    for (const auto& r : reqs) alone.push_back(generate(r));
    EXPECT_NE(alone[0], alone[1]);
    EXPECT_NE(alone[1], alone[2]);
    std::vector<std::vector<uint8_t>> together(6);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < together.size(); ++i) threads.emplace_back([&, i] { together[i] = generate(reqs[i % 3]); });
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < together.size(); ++i) EXPECT_EQ(together[i], alone[i % 3]) << i;
}

// Refusals name the file and the reason, and leave the model usable.
TEST_F(ZImageLora, RefusalsNameTheFileAndTheReason) {
    cn::Model& m = model("tiny_a");
    const auto& targets = m.adapter_host()->targets();
    const auto dev = m.options().device;
    auto refused = [&](const std::string& path, const cn::AdapterLoadOptions& o, cn::Status want, const std::string& text) {
        try {
            (void)cn::Adapter::load(path, o, targets, dev, &m);
            ADD_FAILURE() << path << ": loaded";
        } catch (const cn::Error& e) {
            EXPECT_EQ(e.status(), want) << e.what();
            EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what() << " lacks " << text;
        }
    };
    const Written ok = write_adapter(dir.path, "ok", m, {"layers.0.attention.to_q"}, 2, 1);
    refused(dir.path + "/missing.safetensors", {}, cn::Status::kNotFound, "missing.safetensors");
    // Outside the allowed directory, directly and through a symlink inside it.
    TempDir allowed;
    refused(ok.path, {allowed.path, uint64_t{1} << 30}, cn::Status::kInvalidArgument, "outside the allowed directory");
    ASSERT_EQ(::symlink(ok.path.c_str(), (allowed.path + "/link.safetensors").c_str()), 0);
    refused(allowed.path + "/link.safetensors", {allowed.path, uint64_t{1} << 30}, cn::Status::kInvalidArgument,
            "outside the allowed directory");
    refused(allowed.path + "/../" + std::filesystem::path(dir.path).filename().string() + "/ok.safetensors",
            {allowed.path, uint64_t{1} << 30}, cn::Status::kInvalidArgument, "outside the allowed directory");
    // Inside it, fine; too large for the limit, refused before reading.
    std::filesystem::copy_file(ok.path, allowed.path + "/ok.safetensors");
    EXPECT_NO_THROW((void)cn::Adapter::load(allowed.path + "/ok.safetensors", {allowed.path, uint64_t{1} << 30}, targets, dev, &m));
    refused(allowed.path + "/ok.safetensors", {allowed.path, 100}, cn::Status::kInvalidArgument, "more than the limit of 100");
    // A non-finite factor.
    const int64_t D = weight(m, "layers.0.attention.to_q").size(0);
    at::Tensor a = at::ones({2, D});
    a[0][3] = std::numeric_limits<float>::quiet_NaN();
    write_safetensors(dir.path + "/nan.safetensors",
                      std::map<std::string, at::Tensor>{{"transformer.layers.0.attention.to_q.lora_A.weight", a},
                                                        {"transformer.layers.0.attention.to_q.lora_B.weight", at::ones({D, 2})}});
    refused(dir.path + "/nan.safetensors", {}, cn::Status::kInvalidArgument, "NaN or Inf");
    // Not a safetensors file.
    std::ofstream(dir.path + "/junk.safetensors") << "not a safetensors file";
    refused(dir.path + "/junk.safetensors", {}, cn::Status::kModelFormat, "junk.safetensors");
    // A fused weight that is not finite: refused at the switch, the weights restored.
    { const auto lease = m.adapter_host()->hold({}, run); }  // the weights as loaded
    const at::Tensor before = weight(m, "layers.0.attention.to_q").clone();
    write_safetensors(dir.path + "/ones.safetensors",
                      std::map<std::string, at::Tensor>{{"transformer.layers.0.attention.to_q.lora_A.weight", at::ones({2, D})},
                                                        {"transformer.layers.0.attention.to_q.lora_B.weight", at::ones({D, 2})}});
    auto huge = cn::Adapter::load(dir.path + "/ones.safetensors", {}, targets, dev, &m);  // B @ A = 2 everywhere: x 3e38 is Inf
    // Switched to first from a set in use: the failure must leave the weights as loaded, and that set, asked for
    // again, must be fused again rather than joined.
    at::Tensor fused_once;
    {
        const auto lease = m.adapter_host()->hold({{huge, 1.0f}}, run);
        fused_once = weight(m, "layers.0.attention.to_q").clone();
    }
    EXPECT_FALSE(at::equal(fused_once, before));
    try {
        (void)m.adapter_host()->hold({{huge, 3e38f}}, run);
        ADD_FAILURE() << "a 3e38 scale fused";
    } catch (const cn::Error& e) {
        EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(at::equal(weight(m, "layers.0.attention.to_q"), before));
    { const auto lease = m.adapter_host()->hold({{huge, 1.0f}}, run); }
    EXPECT_TRUE(at::equal(weight(m, "layers.0.attention.to_q"), fused_once));
    { const auto lease = m.adapter_host()->hold({}, run); }
    EXPECT_TRUE(at::equal(weight(m, "layers.0.attention.to_q"), before));
    // An adapter of another model.
    cn::GenerateRequest req;
    req.prompt = "x";
    req.width = req.height = 32;
    cn::Model& other = model("tiny_b");
    const Written theirs = write_adapter(dir.path, "theirs", other, {"layers.0.attention.to_q"}, 2, 3);
    req.adapters.push_back({cn::Adapter::load(theirs.path, {}, other.adapter_host()->targets(), other.options().device, &other), 1.0f});
    // And an adapter made for the other model's shapes does not fit this one.
    refused(theirs.path, {}, cn::Status::kInvalidArgument, "layers.0.attention.to_q");
    try {
        (void)m.generate_bytes(req);
        ADD_FAILURE() << "another model's adapter accepted";
    } catch (const cn::Error& e) {
        EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
    }
}

}  // namespace
