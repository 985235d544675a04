// Toto parity against toto-ts 0.2.0 on the CPU in fp32 (tests/fixtures/toto, scripts/make_toto_fixtures.py: two
// small random-weight checkpoints in the reference's layout, one thread, the reference's own forecasts).
// Every case checks, with the reference's inputs and seed:
//   - the deterministic parts of the first model call (the scaler's loc, scale and scaled input, the patch
//     embedding, every layer's output, the mixture's df, loc, scale and renormalised weights) within rtol 1e-5;
//   - every sample path (the same draws: the same ATen samplers on the same generator, in the reference's order)
//     within |d| <= 1e-5 (|ref - level| + unit) + 4 ulp(ref), level and unit the variate's context mean and
//     sqrt(var + 0.1) (spec §7), and bit for bit on the processor the fixtures were made on (cases.json
//     cpu_capability; another vector unit or BLAS path rounds differently);
//   - the mean and the 0.1 / 0.5 / 0.9 quantiles within the same bound (the mean rollout's path for mean cases).
#include <gtest/gtest.h>

#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/Version.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/models/registry.h"
#include "core/models/toto/toto_model.h"
#include "core/runtime/model.h"
#include "core/runtime/run_context.h"
#include "tests/models/toto/toto_fixture.h"

namespace {

const std::string kDir = cn::test::toto_dir();

const nlohmann::json& cases() { return cn::test::toto_cases(); }

// One array of cases.safetensors (F32, or U8 for the masks), as an at::Tensor.
at::Tensor fixture(const std::string& name) {
    std::string dtype;
    std::vector<int64_t> shape;
    const std::vector<uint8_t> b = cn::test::toto_array(name, &dtype, &shape);
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype == "F32" ? at::kFloat : at::kByte));
    std::memcpy(t.data_ptr(), b.data(), b.size());
    return t;
}

cn::Model& model(const std::string& name) {
    static std::map<std::string, std::unique_ptr<cn::Model>> models;
    auto it = models.find(name);
    if (it == models.end()) it = models.emplace(name, cn::load_model(kDir + "/" + name, cn::ModelOptions{})).first;
    return *it->second;
}

// The case's request: task b = group b, its variates in order; masked positions are NaN (missing).
cn::ForecastRequest request(const nlohmann::json& c, const at::Tensor& series, const at::Tensor& mask) {
    cn::ForecastRequest req;
    const int64_t B = series.size(0), V = series.size(1), T = series.size(2);
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t v = 0; v < V; ++v) {
            std::vector<float> vals(static_cast<size_t>(T));
            for (int64_t t = 0; t < T; ++t) {
                vals[static_cast<size_t>(t)] =
                    mask[b][v][t].item<uint8_t>() ? series[b][v][t].item<float>() : std::numeric_limits<float>::quiet_NaN();
            }
            cn::ForecastSeries s;
            s.values = cn::SeriesValues(vals);
            s.group = b;
            req.series.push_back(std::move(s));
        }
    }
    req.horizon = c["pred_len"];
    if (c["num_samples"].is_null()) {
        req.mean_rollout = true;
    } else {
        req.sample_count = c["num_samples"];
        req.samples_per_batch = c["samples_per_batch"];
        req.quantiles = c["quantile_levels"].get<std::vector<float>>();
    }
    req.kv_cache = c["use_kv_cache"];
    return req;
}

// "model name" of /proc/cpuinfo.
std::string processor() {
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; std::getline(f, line);) {
        if (line.rfind("model name", 0) == 0) {
            std::string v = line.substr(line.find(':') + 1);
            v.erase(0, v.find_first_not_of(" \t"));
            return v;
        }
    }
    return "unknown processor";
}

float ulp(float x) { return std::nextafter(std::fabs(x), std::numeric_limits<float>::infinity()) - std::fabs(x); }

// Deterministic parts: rtol 1e-5 against the reference's magnitude (atol 1e-5 x the tensor's largest value).
// A fused-mode prefill holds one row per series: the reference's first sample copy (rows r = s B + b, s = 0).
void expect_close(const at::Tensor& got, const at::Tensor& full_ref, const std::string& what, size_t* equal, size_t* total) {
    const at::Tensor ref = got.size(0) < full_ref.size(0) ? full_ref.narrow(0, 0, got.size(0)) : full_ref;
    ASSERT_EQ(got.sizes(), ref.sizes()) << what;
    const at::Tensor g = got.to(at::kFloat).contiguous(), r = ref.contiguous();
    const double scale = r.abs().max().item<double>();
    const double worst = ((g - r).abs() - 1e-5 * r.abs()).max().item<double>();
    EXPECT_LE(worst, 1e-5 * scale + 1e-30) << what << ": max excess " << worst << " over rtol 1e-5 (tensor scale " << scale << ")";
    *equal += static_cast<size_t>(g.eq(r).sum().item<int64_t>());
    *total += static_cast<size_t>(r.numel());
}

}  // namespace

// Each case in eager mode (the reference's algorithm: bit-equal on the fixtures' processor) and in fused mode (the
// prefill once per series for its sample copies: the same draws, so the same samples up to rounding; the bit
// equality is measured, not required).
class TotoParity : public ::testing::TestWithParam<std::tuple<int, cn_mode>> {};

TEST_P(TotoParity, MatchesTheReference) {
    const auto& c = cases()["cases"][static_cast<size_t>(std::get<0>(GetParam()))];
    const cn_mode mode = std::get<1>(GetParam());
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    at::set_num_threads(cases()["threads"].get<int>());
    const at::Tensor series = fixture(name + "/series"), mask = fixture(name + "/padding_mask");
    const cn::ForecastRequest req = request(c, series, mask);
    const int64_t B = series.size(0), V = series.size(1), H = req.horizon;
    const bool sampled = !req.mean_rollout;
    const int64_t S = sampled ? req.sample_count : 0, Q = sampled ? static_cast<int64_t>(req.quantiles.size()) : 0;
    cn::Model& m = model(c["model"]);
    m.set_mode(mode);
    cn::RunContext run;
    run.seed = c["seed"];
    run.begin();
    std::vector<float> out(static_cast<size_t>(B * V * (Q + 1) * H)), samples(static_cast<size_t>(B * V * S * H));
    cn::toto::Trace trace;
    cn::toto::forecast_traced(m, req, run, out.data(), out.size(), sampled ? samples.data() : nullptr, samples.size(), &trace);

    // The first model call's deterministic parts.
    size_t equal = 0, total = 0;
    const std::string p = name + "/prefill/";
    expect_close(trace.loc, fixture(p + "loc"), "loc", &equal, &total);
    expect_close(trace.scale, fixture(p + "scale"), "scale", &equal, &total);
    expect_close(trace.scaled, fixture(p + "scaled"), "scaled", &equal, &total);
    expect_close(trace.embed, fixture(p + "embed"), "embed", &equal, &total);
    std::ifstream cfg(kDir + "/" + c["model"].get<std::string>() + "/config.json");
    EXPECT_EQ(static_cast<int64_t>(trace.layers.size()), nlohmann::json::parse(cfg)["num_layers"].get<int64_t>()) << "every layer traced";
    for (size_t i = 0; i < trace.layers.size(); ++i) {
        expect_close(trace.layers[i], fixture(p + "layer" + std::to_string(i)), "layer " + std::to_string(i), &equal, &total);
    }
    expect_close(trace.df, fixture(p + "df"), "df", &equal, &total);
    expect_close(trace.loc_k, fixture(p + "loc_k"), "loc_k", &equal, &total);
    expect_close(trace.scale_k, fixture(p + "scale_k"), "scale_k", &equal, &total);
    expect_close(trace.probs, fixture(p + "probs_norm"), "probs", &equal, &total);
    const bool fixtures_cpu =
        at::get_cpu_capability() == cases()["cpu_capability"].get<std::string>() && processor() == cases()["processor"].get<std::string>();
    const bool same_cpu = mode == CN_MODE_EAGER && fixtures_cpu;  // bit equality required
    std::printf("[ %s %s ] first call: %zu of %zu values bit-equal (%s)\n", name.c_str(), mode == CN_MODE_EAGER ? "eager" : "fused", equal,
                total, fixtures_cpu ? "the fixtures' processor" : "another processor");

    // Series-valued outputs: the §7 bound around each variate's context level.
    const int64_t T = series.size(2);
    auto bound = [&](int64_t b, int64_t v, float ref) {
        double sum = 0, sum2 = 0, n = 0;
        for (int64_t t = 0; t < T; ++t) {
            if (!mask[b][v][t].item<uint8_t>()) continue;
            const double x = series[b][v][t].item<float>();
            sum += x, sum2 += x * x, n += 1;
        }
        const double level = n ? sum / n : 0.0, var = n ? std::max(0.0, sum2 / n - level * level) : 0.0;
        return 1e-5 * (std::fabs(ref - level) + std::sqrt(var + 0.1)) + 4 * ulp(ref);
    };
    size_t s_equal = 0, s_total = 0;
    if (sampled) {
        const at::Tensor ref = fixture(name + "/samples");  // [B, V, H, S]
        for (int64_t b = 0; b < B; ++b) {
            for (int64_t v = 0; v < V; ++v) {
                for (int64_t k = 0; k < S; ++k) {
                    for (int64_t h = 0; h < H; ++h) {
                        const float r = ref[b][v][h][k].item<float>(), g = samples[static_cast<size_t>(((b * V + v) * S + k) * H + h)];
                        EXPECT_LE(std::fabs(g - r), bound(b, v, r)) << "b " << b << " v " << v << " sample " << k << " step " << h;
                        s_equal += g == r;
                        ++s_total;
                    }
                }
            }
        }
        if (same_cpu) EXPECT_EQ(s_equal, s_total) << "samples bit-equal on the fixtures' processor";
    }
    if (same_cpu) EXPECT_EQ(equal, total) << "the first call bit-equal on the fixtures' processor";
    if (sampled) {
        const at::Tensor qs = fixture(name + "/quantiles");  // [Q, B, V, H]
        for (int64_t q = 0; q < Q; ++q) {
            for (int64_t b = 0; b < B; ++b) {
                for (int64_t v = 0; v < V; ++v) {
                    for (int64_t h = 0; h < H; ++h) {
                        const float r = qs[q][b][v][h].item<float>(), g = out[static_cast<size_t>(((b * V + v) * (Q + 1) + q) * H + h)];
                        EXPECT_LE(std::fabs(g - r), bound(b, v, r)) << "quantile " << q << " b " << b << " v " << v << " step " << h;
                    }
                }
            }
        }
    }
    const at::Tensor mean = fixture(name + "/mean");  // [B, V, H]
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t v = 0; v < V; ++v) {
            for (int64_t h = 0; h < H; ++h) {
                const float r = mean[b][v][h].item<float>(), g = out[static_cast<size_t>(((b * V + v) * (Q + 1) + Q) * H + h)];
                EXPECT_LE(std::fabs(g - r), bound(b, v, r)) << "mean b " << b << " v " << v << " step " << h;
                if (!sampled) s_equal += g == r, ++s_total;
            }
        }
    }
    std::printf("[ %s %s ] %s: %zu of %zu values bit-equal\n", name.c_str(), mode == CN_MODE_EAGER ? "eager" : "fused",
                sampled ? "samples" : "mean path", s_equal, s_total);
    if (same_cpu && !sampled) EXPECT_EQ(s_equal, s_total) << "the mean path bit-equal on the fixtures' processor";
}

INSTANTIATE_TEST_SUITE_P(Cases, TotoParity, ::testing::Combine(::testing::Range(0, 12), ::testing::Values(CN_MODE_EAGER, CN_MODE_FUSED)));

TEST(TotoFixtures, CaseCount) { EXPECT_EQ(cases()["cases"].size(), 12u) << "update the Range above"; }

// A request spanning two reference calls (tasks of 2 and 1 variates: two batches): the batches run in order of
// first appearance on one generator seeded once, as torch.manual_seed(seed) followed by one forecast per batch.
TEST(TotoParityBatches, OneGeneratorAcrossTheBatches) {
    at::set_num_threads(cases()["threads"].get<int>());
    for (const auto& c : cases()["multi_batch_cases"]) {
        const std::string name = c["name"];
        SCOPED_TRACE(name);
        cn::ForecastRequest req;
        std::vector<std::pair<int64_t, int64_t>> where;  // (batch, variate) of each request series
        for (int64_t b = 0; b < c["batches"].get<int64_t>(); ++b) {
            const at::Tensor series = fixture(name + "/batch" + std::to_string(b) + "/series");
            const at::Tensor mask = fixture(name + "/batch" + std::to_string(b) + "/padding_mask");
            for (int64_t v = 0; v < series.size(1); ++v) {
                std::vector<float> vals(static_cast<size_t>(series.size(2)));
                for (int64_t t = 0; t < series.size(2); ++t) {
                    vals[static_cast<size_t>(t)] =
                        mask[0][v][t].item<uint8_t>() ? series[0][v][t].item<float>() : std::numeric_limits<float>::quiet_NaN();
                }
                cn::ForecastSeries s;
                s.values = cn::SeriesValues(vals);
                s.group = b;
                req.series.push_back(std::move(s));
                where.emplace_back(b, v);
            }
        }
        req.horizon = c["pred_len"];
        req.sample_count = c["num_samples"];
        req.samples_per_batch = c["samples_per_batch"];
        req.quantiles = c["quantile_levels"].get<std::vector<float>>();
        cn::Model& m = model(c["model"]);
        m.set_mode(CN_MODE_EAGER);
        cn::RunContext run;
        run.seed = c["seed"];
        run.begin();
        const int64_t H = req.horizon, S = req.sample_count, n = static_cast<int64_t>(req.series.size());
        std::vector<float> out(static_cast<size_t>(n * 4 * H)), samples(static_cast<size_t>(n * S * H));
        cn::toto::forecast_traced(m, req, run, out.data(), out.size(), samples.data(), samples.size(), nullptr);
        const bool fixtures_cpu = at::get_cpu_capability() == cases()["cpu_capability"].get<std::string>() &&
                                  processor() == cases()["processor"].get<std::string>();
        size_t equal = 0, total = 0;
        for (int64_t i = 0; i < n; ++i) {
            const auto [b, v] = where[static_cast<size_t>(i)];
            const at::Tensor ref = fixture(name + "/batch" + std::to_string(b) + "/samples");  // [1, V, H, S]
            for (int64_t k = 0; k < S; ++k) {
                for (int64_t h = 0; h < H; ++h) {
                    const float r = ref[0][v][h][k].item<float>(), g = samples[static_cast<size_t>((i * S + k) * H + h)];
                    EXPECT_NEAR(g, r, 1e-4 * (1 + std::fabs(r))) << "series " << i << " sample " << k << " step " << h;
                    equal += g == r;
                    ++total;
                }
            }
        }
        std::printf("[ %s ] samples: %zu of %zu values bit-equal\n", name.c_str(), equal, total);
        if (fixtures_cpu) EXPECT_EQ(equal, total);
    }
}
