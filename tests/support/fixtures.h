// Test helpers: temporary directories and hand-made safetensors / config files. LibTorch-free.
#pragma once

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace cn::test {

// A fresh directory under $TMPDIR, removed with its contents on destruction. Plain POSIX on purpose:
// libtorch.so exports std::filesystem symbols of its own that crash when a test binary binds to them.
class TempDir {
public:
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/cn_test_XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (!mkdtemp(buf.data())) std::abort();
        path_ = buf.data();
    }
    ~TempDir() {
        ::nftw(path_.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16, FTW_DEPTH | FTW_PHYS);
    }
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// 8-byte little-endian header length + header + data.
inline std::string safetensors_raw(const std::string& header_json, const std::string& data) {
    std::string out(8, '\0');
    const uint64_t n = header_json.size();
    std::memcpy(out.data(), &n, 8);
    return out + header_json + data;
}

struct F32Tensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> values;  // empty: filled with deterministic pseudo-random values
};

// A valid F32 safetensors file holding `tensors` in the given order.
inline std::string safetensors_f32(std::vector<F32Tensor> tensors, uint32_t seed = 1) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
    std::string header = "{";
    std::string data;
    for (size_t i = 0; i < tensors.size(); ++i) {
        auto& t = tensors[i];
        uint64_t n = 1;
        for (auto d : t.shape) n *= static_cast<uint64_t>(d);
        if (t.values.empty()) {
            t.values.resize(n);
            for (auto& v : t.values) v = dist(rng);
        }
        const uint64_t begin = data.size();
        data.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
        std::string shape = "[";
        for (size_t k = 0; k < t.shape.size(); ++k) shape += (k ? "," : "") + std::to_string(t.shape[k]);
        shape += "]";
        header += (i ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" +
                  std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
    }
    header += "}";
    while (header.size() % 8) header += ' ';
    return safetensors_raw(header, data);
}

// Shapes of a Chronos-2 checkpoint (the real parameter names) for the given dimensions.
struct Chronos2Dims {
    int64_t d_model = 8, d_kv = 4, d_ff = 16, num_layers = 2, num_heads = 2, patch = 4;
    std::vector<double> quantiles = {0.1, 0.5, 0.9};
    int64_t context_length = 64, max_output_patches = 4;
};

inline std::vector<F32Tensor> chronos2_tensors(const Chronos2Dims& d) {
    const int64_t D = d.d_model, I = d.num_heads * d.d_kv, F = d.d_ff, p = d.patch;
    const int64_t Q = static_cast<int64_t>(d.quantiles.size());
    std::vector<F32Tensor> t;
    t.push_back({"shared.weight", {2, D}, {}});
    auto block = [&](const std::string& pre, int64_t in, int64_t out) {
        t.push_back({pre + ".hidden_layer.weight", {F, in}, {}});
        t.push_back({pre + ".hidden_layer.bias", {F}, {}});
        t.push_back({pre + ".output_layer.weight", {out, F}, {}});
        t.push_back({pre + ".output_layer.bias", {out}, {}});
        t.push_back({pre + ".residual_layer.weight", {out, in}, {}});
        t.push_back({pre + ".residual_layer.bias", {out}, {}});
    };
    block("input_patch_embedding", 3 * p, D);
    block("output_patch_embedding", D, Q * p);
    t.push_back({"encoder.final_layer_norm.weight", {D}, {}});
    for (int64_t i = 0; i < d.num_layers; ++i) {
        const std::string b = "encoder.block." + std::to_string(i) + ".layer.";
        for (int s : {0, 1}) {
            const std::string a = b + std::to_string(s);
            t.push_back({a + ".layer_norm.weight", {D}, {}});
            t.push_back({a + ".self_attention.q.weight", {I, D}, {}});
            t.push_back({a + ".self_attention.k.weight", {I, D}, {}});
            t.push_back({a + ".self_attention.v.weight", {I, D}, {}});
            t.push_back({a + ".self_attention.o.weight", {D, I}, {}});
        }
        t.push_back({b + "2.layer_norm.weight", {D}, {}});
        t.push_back({b + "2.mlp.wi.weight", {F, D}, {}});
        t.push_back({b + "2.mlp.wo.weight", {D, F}, {}});
    }
    return t;
}

inline std::string chronos2_config_json(const Chronos2Dims& d) {
    std::string q = "[";
    for (size_t i = 0; i < d.quantiles.size(); ++i) q += (i ? ", " : "") + std::to_string(d.quantiles[i]);
    q += "]";
    return "{\"architectures\": [\"Chronos2Model\"], \"model_type\": \"t5\", \"d_model\": " + std::to_string(d.d_model) +
           ", \"d_kv\": " + std::to_string(d.d_kv) + ", \"d_ff\": " + std::to_string(d.d_ff) +
           ", \"num_layers\": " + std::to_string(d.num_layers) + ", \"num_heads\": " + std::to_string(d.num_heads) +
           ", \"layer_norm_epsilon\": 1e-6, \"feed_forward_proj\": \"relu\", \"rope_theta\": 10000.0,"
           " \"chronos_config\": {\"context_length\": " +
           std::to_string(d.context_length) + ", \"input_patch_size\": " + std::to_string(d.patch) +
           ", \"input_patch_stride\": " + std::to_string(d.patch) + ", \"output_patch_size\": " + std::to_string(d.patch) +
           ", \"max_output_patches\": " + std::to_string(d.max_output_patches) + ", \"quantiles\": " + q +
           ", \"use_reg_token\": true, \"use_arcsinh\": true}}";
}

// Writes config.json + model.safetensors of a small random-weight Chronos-2 into dir.
inline void write_chronos2_checkpoint(const std::string& dir, const Chronos2Dims& d = {}) {
    write_file(dir + "/config.json", chronos2_config_json(d));
    write_file(dir + "/model.safetensors", safetensors_f32(chronos2_tensors(d)));
}

}  // namespace cn::test
