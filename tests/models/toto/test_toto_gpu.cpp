// GPU (ctest label "gpu"): Toto's eager path on CUDA in fp32 against the CPU's on the fixtures (the reference's
// draws on CUDA come from the Philox generator, so the CPU fixtures' samples do not apply). Checked: the first
// model call's mixture parameters and the mean rollout within 1e-4 relative of the CPU's (cuBLAS and the fused
// attention kernels round differently; TF32 is off), and the sampled forecast's statistics deterministic for a
// seed and finite. Skips without CUDA.
#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/models/registry.h"
#include "core/models/toto/toto_model.h"
#include "core/runtime/model.h"
#include "core/runtime/run_context.h"
#include "tests/models/toto/toto_fixture.h"

namespace {

std::unique_ptr<cn::Model> open(const std::string& name, c10::Device device, cn_mode mode = CN_MODE_EAGER,
                                c10::ScalarType dtype = c10::kFloat) {
    cn::ModelOptions o;
    o.device = device;
    o.dtype = dtype;
    auto m = cn::load_model(cn::test::toto_dir() + "/" + name, o);
    m->set_mode(mode);
    return m;
}

cn::ForecastRequest request(int64_t V, int64_t T, int64_t horizon) {
    cn::ForecastRequest req;
    for (int64_t v = 0; v < V; ++v) {
        std::vector<float> x(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) x[static_cast<size_t>(t)] = std::sin(0.3f * t + v) * (10.0f + v) + 0.05f * t;
        cn::ForecastSeries s;
        s.values = cn::SeriesValues(x);
        s.group = 1;
        req.series.push_back(std::move(s));
    }
    req.horizon = horizon;
    return req;
}

std::vector<float> run(cn::Model& m, const cn::ForecastRequest& req, uint64_t seed, cn::toto::Trace* trace, size_t n_out) {
    cn::RunContext rc;
    rc.seed = seed;
    rc.begin();
    std::vector<float> out(n_out);
    cn::toto::forecast_traced(m, req, rc, out.data(), out.size(), nullptr, 0, trace);
    return out;
}

}  // namespace

TEST(TotoGpu, EagerAgreesWithTheCpu) {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA";
    at::globalContext().setAllowTF32CuBLAS(false);
    for (const char* name : {"tiny_a", "tiny_b"}) {
        SCOPED_TRACE(name);
        auto cpu = open(name, c10::Device(c10::kCPU)), gpu = open(name, c10::Device(c10::kCUDA, 0));
        cn::ForecastRequest req = request(3, 45, 37);
        req.mean_rollout = true;
        cn::toto::Trace tc, tg;
        const size_t n = req.series.size() * static_cast<size_t>(req.horizon);
        const std::vector<float> a = run(*cpu, req, 0, &tc, n), b = run(*gpu, req, 0, &tg, n);
        for (const auto& [x, y, what] : {std::tuple{tc.df, tg.df, "df"}, std::tuple{tc.loc_k, tg.loc_k, "loc"},
                                         std::tuple{tc.scale_k, tg.scale_k, "scale"}, std::tuple{tc.probs, tg.probs, "probs"}}) {
            const at::Tensor d = (y.cpu() - x).abs() - 1e-4 * x.abs();
            EXPECT_LE(d.max().item<double>(), 1e-4 * (1 + x.abs().max().item<double>())) << what;
        }
        for (size_t i = 0; i < n; ++i) EXPECT_NEAR(b[i], a[i], 1e-4 * (1 + std::fabs(a[i]))) << "mean rollout " << i;
        // Sampled: finite, and the same seed gives the same forecast.
        cn::ForecastRequest s = request(3, 45, 37);
        s.sample_count = 64;
        s.samples_per_batch = 16;
        const size_t ns = s.series.size() * 10 * static_cast<size_t>(s.horizon);
        const std::vector<float> p = run(*gpu, s, 7, nullptr, ns), q = run(*gpu, s, 7, nullptr, ns);
        EXPECT_EQ(p, q);
        for (float v : p) EXPECT_TRUE(std::isfinite(v));
        // Fused (the prefill once per series, small attentions in three ops): the same draws, so the same forecast
        // up to rounding; bf16 fused: finite, its distance from fp32 reported and loosely bounded (random tiny
        // weights amplify rounding more than a trained model does; docs/benchmarks.md has the full-size numbers).
        auto fused = open(name, c10::Device(c10::kCUDA, 0), CN_MODE_FUSED);
        auto bf16 = open(name, c10::Device(c10::kCUDA, 0), CN_MODE_FUSED, c10::kBFloat16);
        const std::vector<float> f = run(*fused, s, 7, nullptr, ns), h = run(*bf16, s, 7, nullptr, ns);
        double worst = 0, worst16 = 0, spread = 0;
        for (size_t i = 0; i < ns; ++i) {
            EXPECT_NEAR(f[i], p[i], 1e-3 * (1 + std::fabs(p[i]))) << "fused output " << i;
            EXPECT_TRUE(std::isfinite(h[i]));
            worst = std::max(worst, static_cast<double>(std::fabs(f[i] - p[i])));
            worst16 = std::max(worst16, static_cast<double>(std::fabs(h[i] - p[i])));
            spread = std::max(spread, static_cast<double>(std::fabs(p[i])));
        }
        std::printf("[ %s ] fused vs eager: max |d| %.3g; bf16 fused vs eager: max |d| %.3g (outputs up to %.3g)\n", name, worst, worst16,
                    spread);
        EXPECT_LT(worst16, 0.5 * (1 + spread));
    }
}

// Graph mode replays fused mode's kernels on fused mode's draws: its forecasts are fused mode's (bit for bit, the
// same kernels and Philox offsets), on a captured shape's first call, on a later call of the same shape with
// another seed (the cached graph, re-seeded), with several sample batches, across two batches of tasks (one
// stream), and after another shape evicted nothing it needed; its graph pool is reported.
TEST(TotoGpu, GraphModeEqualsFused) {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA";
    at::globalContext().setAllowTF32CuBLAS(false);
    auto fused = open("tiny_a", c10::Device(c10::kCUDA, 0), CN_MODE_FUSED);
    auto graph = open("tiny_a", c10::Device(c10::kCUDA, 0), CN_MODE_GRAPH);
    struct Case {
        int64_t V, T, H, S, sbs;
        uint64_t seed;
        bool two_tasks;
    };
    for (const Case& k : {Case{3, 45, 37, 16, 16, 7, false}, Case{3, 45, 37, 16, 16, 8, false}, Case{3, 45, 37, 32, 8, 9, false},
                          Case{2, 30, 20, 8, 4, 10, true}, Case{3, 45, 37, 16, 16, 11, false}}) {
        cn::ForecastRequest r = request(k.V, k.T, k.H);
        if (k.two_tasks) {  // a second task of another length: two batches, one generator
            cn::ForecastRequest more = request(1, k.T + 20, k.H);
            more.series[0].group = 2;
            r.series.push_back(more.series[0]);
        }
        r.sample_count = static_cast<int32_t>(k.S);
        r.samples_per_batch = static_cast<int32_t>(k.sbs);
        const size_t n = r.series.size() * 10 * static_cast<size_t>(r.horizon);
        const std::vector<float> f = run(*fused, r, k.seed, nullptr, n), g = run(*graph, r, k.seed, nullptr, n);
        size_t equal = 0;
        for (size_t i = 0; i < n; ++i) {
            EXPECT_NEAR(g[i], f[i], 1e-5 * (1 + std::fabs(f[i]))) << "seed " << k.seed << " output " << i;
            equal += g[i] == f[i];
        }
        std::printf("[ graph vs fused, seed %llu ] %zu of %zu outputs bit-equal\n", static_cast<unsigned long long>(k.seed), equal, n);
    }
    cn_model_info info;
    graph->fill_info(info);
    EXPECT_GT(info.graph_pool_bytes, 0u);
    std::printf("[ graph mode ] graph pools: %.1f MB\n", static_cast<double>(info.graph_pool_bytes) / (1 << 20));
}
