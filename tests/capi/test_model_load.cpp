// Loading models through the C ABI: a Chronos-2 checkpoint in the real parameter layout (random weights,
// written here), its info, and every way a checkpoint can disagree with its config.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "cutenative.h"
#include "tests/support/fixtures.h"

namespace {

struct Loaded {
    cn_status status;
    std::string message;
    cn_model* model;
};

Loaded load(const std::string& dir, const cn_model_params* params = nullptr) {
    cn_error* err = nullptr;
    cn_error_create(&err);
    cn_model* m = nullptr;
    const cn_status s = cn_model_create(dir.c_str(), params, &m, err);
    Loaded r{s, cn_error_message(err), m};
    cn_error_free(err);
    return r;
}

uint64_t count_params(const cn::test::Chronos2Dims& d) {
    uint64_t n = 0;
    for (const auto& t : cn::test::chronos2_tensors(d)) {
        uint64_t e = 1;
        for (auto x : t.shape) e *= static_cast<uint64_t>(x);
        n += e;
    }
    return n;
}

}  // namespace

TEST(ModelLoad, Chronos2InfoDescribeQuantiles) {
    cn::test::TempDir d;
    cn::test::Chronos2Dims dims;
    cn::test::write_chronos2_checkpoint(d.path(), dims);
    Loaded r = load(d.path());
    ASSERT_EQ(r.status, CN_STATUS_OK) << r.message;
    ASSERT_NE(r.model, nullptr);

    cn_model_info info;
    cn_model_info_init(&info);
    ASSERT_EQ(cn_model_get_info(r.model, &info, nullptr), CN_STATUS_OK);
    EXPECT_EQ(info.kind, CN_MODEL_KIND_CHRONOS2);
    EXPECT_EQ(info.device_type, CN_DEVICE_CPU);
    EXPECT_EQ(info.dtype, CN_DTYPE_F32);
    EXPECT_EQ(info.mode, CN_MODE_EAGER);
    EXPECT_EQ(info.n_parameters, count_params(dims));
    EXPECT_EQ(info.weight_bytes, count_params(dims) * 4);
    EXPECT_EQ(info.context_length, 64);
    EXPECT_EQ(info.native_horizon, 16);
    EXPECT_EQ(info.n_default_quantiles, 3);
    EXPECT_EQ(info.embedding_dim, 0);

    size_t nq = 0;
    ASSERT_EQ(cn_model_get_quantiles(r.model, nullptr, 0, &nq, nullptr), CN_STATUS_OK);
    ASSERT_EQ(nq, 3u);
    float q[3];
    ASSERT_EQ(cn_model_get_quantiles(r.model, q, 3, &nq, nullptr), CN_STATUS_OK);
    EXPECT_FLOAT_EQ(q[0], 0.1f);
    EXPECT_FLOAT_EQ(q[1], 0.5f);
    EXPECT_FLOAT_EQ(q[2], 0.9f);
    EXPECT_EQ(cn_model_get_quantiles(r.model, q, 2, &nq, nullptr), CN_STATUS_INVALID_ARGUMENT);

    size_t need = 0;
    ASSERT_EQ(cn_model_describe(r.model, nullptr, 0, &need, nullptr), CN_STATUS_OK);
    std::string text(need, 'x');
    ASSERT_EQ(cn_model_describe(r.model, text.data(), need, &need, nullptr), CN_STATUS_OK);
    EXPECT_EQ(text.back(), '\0');
    const auto j = nlohmann::json::parse(text.c_str());
    EXPECT_EQ(j["kind"], "chronos2");
    EXPECT_EQ(j["device"], "cpu");
    EXPECT_EQ(j["config"]["d_model"], 8);
    EXPECT_EQ(j["memory"]["weight_bytes"], info.weight_bytes);
    char small[10];
    EXPECT_EQ(cn_model_describe(r.model, small, sizeof(small), &need, nullptr), CN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(std::strlen(small), 9u) << "truncated output stays NUL-terminated";
    EXPECT_EQ(need, text.size());

    cn_model_free(r.model);
}

TEST(ModelLoad, ModesOnCpu) {
    cn::test::TempDir d;
    cn::test::write_chronos2_checkpoint(d.path());
    Loaded r = load(d.path());
    ASSERT_EQ(r.status, CN_STATUS_OK) << r.message;
    cn_error* err = nullptr;
    cn_error_create(&err);
    EXPECT_EQ(cn_model_set_mode(r.model, CN_MODE_GRAPH, err), CN_STATUS_UNSUPPORTED);
    EXPECT_NE(std::string(cn_error_message(err)).find("mode 'graph' is not available"), std::string::npos) << cn_error_message(err);
    cn_mode m = CN_MODE_FUSED;
    ASSERT_EQ(cn_model_get_mode(r.model, &m, err), CN_STATUS_OK);
    EXPECT_EQ(m, CN_MODE_EAGER) << "a refused switch leaves the mode as it was";
    EXPECT_EQ(cn_model_set_mode(r.model, CN_MODE_FUSED, err), CN_STATUS_OK) << "fused falls back to eager ops";
    ASSERT_EQ(cn_model_get_mode(r.model, &m, err), CN_STATUS_OK);
    EXPECT_EQ(m, CN_MODE_FUSED);
    EXPECT_EQ(cn_model_set_mode(r.model, CN_MODE_EAGER, err), CN_STATUS_OK);
    EXPECT_EQ(cn_model_set_mode(r.model, static_cast<cn_mode>(9), err), CN_STATUS_INVALID_ARGUMENT);
    cn_error_free(err);
    cn_model_free(r.model);

    // Asking for graph mode at create time fails the create on CPU.
    cn_model_params p;
    cn_model_params_init(&p);
    p.mode = CN_MODE_GRAPH;
    Loaded g = load(d.path(), &p);
    EXPECT_EQ(g.status, CN_STATUS_UNSUPPORTED) << g.message;
    EXPECT_EQ(g.model, nullptr);
}

TEST(ModelLoad, OtherCapabilitiesAreUnsupported) {
    cn::test::TempDir d;
    cn::test::write_chronos2_checkpoint(d.path());
    Loaded r = load(d.path());
    ASSERT_EQ(r.status, CN_STATUS_OK) << r.message;
    cn_error* err = nullptr;
    cn_error_create(&err);
    const char* texts[1] = {"x"};
    float out[4];
    EXPECT_EQ(cn_embed(r.model, texts, 1, nullptr, out, 4, err), CN_STATUS_UNSUPPORTED);
    EXPECT_STREQ(cn_error_message(err), "chronos2 models cannot embed");
    cn_generate_request* g = nullptr;
    cn_generate_request_create(&g, nullptr);
    size_t bytes = 0;
    EXPECT_EQ(cn_generate_get_size(r.model, g, &bytes, err), CN_STATUS_UNSUPPORTED);
    uint8_t px[4];
    EXPECT_EQ(cn_generate(r.model, g, nullptr, px, 4, err), CN_STATUS_UNSUPPORTED);
    cn_generate_request_free(g);
    cn_error_free(err);
    cn_model_free(r.model);
}

TEST(ModelLoad, DtypesAndZeroCopy) {
    cn::test::TempDir d;
    cn::test::Chronos2Dims dims;
    cn::test::write_chronos2_checkpoint(d.path(), dims);
    cn_model_params p;
    cn_model_params_init(&p);
    p.dtype = CN_DTYPE_BF16;
    Loaded r = load(d.path(), &p);
    ASSERT_EQ(r.status, CN_STATUS_OK) << r.message;
    cn_model_info info;
    cn_model_info_init(&info);
    ASSERT_EQ(cn_model_get_info(r.model, &info, nullptr), CN_STATUS_OK);
    EXPECT_EQ(info.dtype, CN_DTYPE_BF16);
    EXPECT_EQ(info.weight_bytes, count_params(dims) * 2);
    cn_model_free(r.model);

    cn_model_params_init(&p);
    p.mmap_weights = 1;
    p.check_tensors = 1;
    r = load(d.path(), &p);
    ASSERT_EQ(r.status, CN_STATUS_OK) << r.message;
    cn_model_free(r.model);
}

TEST(ModelLoad, ShardedChronos2) {
    cn::test::TempDir d;
    cn::test::Chronos2Dims dims;
    auto tensors = cn::test::chronos2_tensors(dims);
    const size_t half = tensors.size() / 2;
    std::vector<cn::test::F32Tensor> a(tensors.begin(), tensors.begin() + half), b(tensors.begin() + half, tensors.end());
    std::string map;
    for (size_t i = 0; i < tensors.size(); ++i) {
        map +=
            (i ? "," : "") + std::string("\"") + tensors[i].name + "\":\"model-0000" + (i < half ? "1" : "2") + "-of-00002.safetensors\"";
    }
    cn::test::write_file(d.file("config.json"), cn::test::chronos2_config_json(dims));
    cn::test::write_file(d.file("model-00001-of-00002.safetensors"), cn::test::safetensors_f32(a));
    cn::test::write_file(d.file("model-00002-of-00002.safetensors"), cn::test::safetensors_f32(b));
    cn::test::write_file(d.file("model.safetensors.index.json"), "{\"metadata\":{},\"weight_map\":{" + map + "}}");
    Loaded r = load(d.path());
    ASSERT_EQ(r.status, CN_STATUS_OK) << r.message;
    cn_model_free(r.model);
}

TEST(ModelLoad, CheckpointDisagreeingWithConfigIsModelFormat) {
    struct Case {
        const char* name;
        std::function<void(std::vector<cn::test::F32Tensor>&)> edit;
        const char* message;
    };
    const std::vector<Case> cases = {
        {"wrong shape",
         [](auto& t) {
             for (auto& x : t)
                 if (x.name == "encoder.block.1.layer.2.mlp.wi.weight") x.shape = {17, 8};
         },
         "tensor \"encoder.block.1.layer.2.mlp.wi.weight\" has shape [17, 8] but the config implies [16, 8]"},
        {"missing tensor", [](auto& t) { t.erase(t.begin() + 3); }, "missing tensor \"input_patch_embedding.output_layer.weight\""},
        {"extra tensor", [](auto& t) { t.push_back({"encoder.block.9.layer.0.layer_norm.weight", {8}, {}}); },
         "unexpected tensor \"encoder.block.9.layer.0.layer_norm.weight\""},
        {"nan weight with check_tensors",
         [](auto& t) {
             t[0].values.assign(16, 0.0f);
             t[0].values[5] = std::numeric_limits<float>::quiet_NaN();
         },
         "tensor \"shared.weight\" holds 1 NaN/Inf value(s)"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        cn::test::TempDir d;
        cn::test::Chronos2Dims dims;
        auto tensors = cn::test::chronos2_tensors(dims);
        c.edit(tensors);
        cn::test::write_file(d.file("config.json"), cn::test::chronos2_config_json(dims));
        cn::test::write_file(d.file("model.safetensors"), cn::test::safetensors_f32(tensors));
        cn_model_params p;
        cn_model_params_init(&p);
        p.check_tensors = 1;
        Loaded r = load(d.path(), &p);
        EXPECT_EQ(r.status, CN_STATUS_MODEL_FORMAT) << r.message;
        EXPECT_NE(r.message.find(c.message), std::string::npos) << r.message;
        EXPECT_EQ(r.model, nullptr);
    }
}

TEST(ModelLoad, UnknownAndUnbuiltArchitectures) {
    cn::test::TempDir d;
    cn::test::write_file(d.file("config.json"), R"({"architectures": ["LlamaForCausalLM"]})");
    Loaded r = load(d.path());
    EXPECT_EQ(r.status, CN_STATUS_UNSUPPORTED);
    EXPECT_NE(r.message.find("unknown architecture"), std::string::npos) << r.message;

    cn::test::TempDir e;
    r = load(e.path());
    EXPECT_EQ(r.status, CN_STATUS_NOT_FOUND);
    EXPECT_NE(r.message.find("config.json: no such file"), std::string::npos) << r.message;

    cn::test::write_file(e.file("config.json"), R"({"architectures": ["Chronos2Model"], "d_model": "big"})");
    r = load(e.path());
    EXPECT_EQ(r.status, CN_STATUS_MODEL_FORMAT);
    EXPECT_NE(r.message.find("config.json: field 'd_model': expected an integer"), std::string::npos) << r.message;
}

TEST(ModelLoad, CudaWithoutDeviceIsUnsupported) {
    if (cn_cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
    cn::test::TempDir d;
    cn::test::write_chronos2_checkpoint(d.path());
    cn_model_params p;
    cn_model_params_init(&p);
    p.device_type = CN_DEVICE_CUDA;
    Loaded r = load(d.path(), &p);
    EXPECT_EQ(r.status, CN_STATUS_UNSUPPORTED);
    EXPECT_NE(r.message.find("no CUDA device"), std::string::npos) << r.message;
}
