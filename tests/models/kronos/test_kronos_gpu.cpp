// GPU (ctest label "gpu"): Kronos on CUDA in its three modes over every fixture case. The reference's draws on
// CUDA come from the Philox generator, so the CPU fixtures' tokens do not apply; instead: eager (the reference
// algorithm) against fused (KV cache) and graph (the cached step replayed from CUDA graphs) - the same seed gives
// the same draws wherever the logits agree, so nearly all tokens must be equal - and graph mode is
// deterministic across calls and reports its graph memory. Skips without CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <ATen/Context.h>
#include <nlohmann/json.hpp>

#include "core/models/kronos/kronos_model.h"
#include "core/models/registry.h"
#include "core/runtime/model.h"
#include "core/runtime/run_context.h"
#include "tests/models/kronos/kronos_fixture.h"

#ifdef CN_WITH_CUDA
#include "core/models/kronos/kronos_graphs.h"
#endif

namespace {

#ifdef CN_WITH_CUDA
constexpr int64_t kWholeSteps = cn::kronos::KronosGraphs::kMaxWholeSteps;
#else
constexpr int64_t kWholeSteps = 64;  // (the test skips without CUDA)
#endif

// One traced call with this seed; `out` receives the forecast when given.
cn::kronos::KronosTrace traced(cn::Model& m, const cn::ForecastRequest& req, uint64_t seed, std::vector<float>* out = nullptr) {
    cn::RunContext run;
    run.seed = seed;
    run.begin();
    std::vector<float> values(req.series.size() * req.horizon);
    cn::kronos::KronosTrace t;
    cn::kronos::forecast_traced(m, req, run, values.data(), values.size(), &t);
    if (out) *out = std::move(values);
    return t;
}

std::unique_ptr<cn::Model> cuda_model(const std::string& name, cn_mode mode, c10::ScalarType dtype = c10::kFloat) {
    cn::ModelOptions o;
    o.device = c10::Device(c10::kCUDA, 0);
    o.dtype = dtype;
    auto m = cn::load_model(std::string(CN_FIXTURES_DIR) + "/kronos/" + name, o);
    m->set_mode(mode);
    return m;
}

// Adds the tokens of `b` equal to `a`'s (s1 and s2, every row and step) to eq, and the tokens compared to n.
void count_equal(const cn::kronos::KronosTrace& a, const cn::kronos::KronosTrace& b, size_t& eq, size_t& n) {
    ASSERT_EQ(a.s1.size(), b.s1.size());
    for (size_t r = 0; r < a.s1.size(); ++r) {
        for (size_t k = 0; k < a.s1[r].size(); ++k) {
            eq += (a.s1[r][k] == b.s1[r][k]) + (a.s2[r][k] == b.s2[r][k]);
            n += 2;
        }
    }
}

// The fixture case `name` with its first series' history shortened by `cut` bars.
nlohmann::json case_cut(const std::string& name, int cut) {
    for (const auto& x : cn::test::kronos_cases()) {
        if (x["name"] != name) continue;
        nlohmann::json c = x;
        nlohmann::json& s = c["series"][0];
        for (auto& ch : s["values"]) ch.erase(ch.begin(), ch.begin() + cut);
        s["history_ts"].erase(s["history_ts"].begin(), s["history_ts"].begin() + cut);
        return c;
    }
    ADD_FAILURE() << "no fixture case " << name;
    return {};
}

struct Runs {
    std::vector<cn::kronos::KronosTrace> traces;
    std::vector<std::vector<float>> outs;
};

Runs run_all(cn_mode mode, c10::ScalarType dtype = c10::kFloat) {
    const auto cases = cn::test::kronos_cases();
    Runs r;
    std::map<std::string, std::unique_ptr<cn::Model>> models;
    for (const auto& c : cases) {
        const std::string name = c["model"];
        if (!models.count(name)) models[name] = cuda_model(name, mode, dtype);
        std::vector<float> out;
        r.traces.push_back(traced(*models[name], cn::test::kronos_request(c), c["seed"], &out));
        r.outs.push_back(std::move(out));
    }
    if (mode == CN_MODE_GRAPH) {
        cn_model_info info{};
        info.struct_size = sizeof(info);
        models.begin()->second->fill_info(info);
        EXPECT_GT(info.graph_pool_bytes, 0u) << "graph mode captured nothing";
    }
    return r;
}

std::pair<size_t, size_t> agreement(const Runs& a, const Runs& b) {
    size_t eq = 0, n = 0;
    for (size_t c = 0; c < a.traces.size(); ++c) count_equal(a.traces[c], b.traces[c], eq, n);
    return {eq, n};
}

}  // namespace

TEST(KronosGpu, ModesAgreeAndGraphsAreDeterministic) {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    const Runs eager = run_all(CN_MODE_EAGER), fused = run_all(CN_MODE_FUSED), graph = run_all(CN_MODE_GRAPH);
    const auto [ef, n1] = agreement(eager, fused);
    const auto [eg, n2] = agreement(eager, graph);
    std::printf("[ kronos   ] CUDA tokens equal to eager: fused %zu/%zu, graph %zu/%zu\n", ef, n1, eg, n2);
    EXPECT_GE(static_cast<double>(ef), 0.95 * n1);
    EXPECT_GE(static_cast<double>(eg), 0.95 * n2);
    // The degenerate cases alone (constant channels, one bar, extreme magnitudes: the normalisation's branch
    // comes from the host's numpy-order statistics, the same in every mode).
    const auto cases = cn::test::kronos_cases();
    size_t df = 0, dg = 0, dn = 0, dn2 = 0;
    for (size_t c = 0; c < cases.size(); ++c) {
        if (cases[c]["name"].get<std::string>().rfind("deg_", 0) != 0) continue;
        count_equal(eager.traces[c], fused.traces[c], df, dn);
        count_equal(eager.traces[c], graph.traces[c], dg, dn2);
    }
    std::printf("[ kronos   ] degenerate cases, CUDA tokens equal to eager: fused %zu/%zu, graph %zu/%zu\n", df, dn, dg, dn2);
    EXPECT_GT(dn, 0u);
    EXPECT_GE(static_cast<double>(df), 0.95 * dn);
    EXPECT_GE(static_cast<double>(dg), 0.95 * dn2);
    const Runs again = run_all(CN_MODE_GRAPH);
    for (size_t c = 0; c < graph.outs.size(); ++c) {
        EXPECT_EQ(graph.outs[c], again.outs[c]) << "graph mode is not deterministic in case " << c;
    }
}

// bf16 (opt-in, not exact): every mode runs on CUDA, outputs are finite, graph mode is deterministic, and the
// bf16 modes mostly agree with each other (rounding differs between the eager, cached and graph paths, and a
// path diverges after its first different token: the bound is loose, the measured share is printed).
TEST(KronosGpu, Bf16ModesRunAndAgreeMostly) {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    const Runs eager = run_all(CN_MODE_EAGER, c10::kBFloat16), graph = run_all(CN_MODE_GRAPH, c10::kBFloat16);
    const auto [eg, n] = agreement(eager, graph);
    std::printf("[ kronos   ] CUDA bf16 tokens of graph mode equal to bf16 eager: %zu/%zu\n", eg, n);
    EXPECT_GE(static_cast<double>(eg), 0.5 * n);
    for (const auto& out : graph.outs) {
        for (float v : out) ASSERT_TRUE(std::isfinite(v));
    }
    const Runs again = run_all(CN_MODE_GRAPH, c10::kBFloat16);
    for (size_t c = 0; c < graph.outs.size(); ++c) EXPECT_EQ(graph.outs[c], again.outs[c]) << "case " << c;
}

// Graph mode keeps at most KronosGraphs::kMaxEnds prologue/epilogue graphs per batch shape; a call whose tasks
// have more distinct history lengths for one row count replays only the step (eager prologue). Both paths must
// draw what eager mode draws: six tasks of different lengths, cut from one fixture series.
TEST(KronosGpu, ManyHistoryLengthsFallBackToTheStepGraph) {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    nlohmann::json many = case_cut("a_top_p", 0);
    ASSERT_FALSE(many.is_null());
    many["series"] = nlohmann::json::array();
    for (int cut = 0; cut < 6; ++cut) many["series"].push_back(case_cut("a_top_p", cut)["series"][0]);  // histories 30..25
    const cn::ForecastRequest req = cn::test::kronos_request(many);
    const auto eager = traced(*cuda_model("tiny_a", CN_MODE_EAGER), req, 7);
    const auto graph = traced(*cuda_model("tiny_a", CN_MODE_GRAPH), req, 7);
    ASSERT_EQ(eager.s1.size(), 6u);
    size_t eq = 0, n = 0;
    count_equal(eager, graph, eq, n);
    EXPECT_GE(static_cast<double>(eq), 0.95 * n) << eq << " of " << n;
}

// The graph caches are LRU-bounded (KronosGraphs::kMaxEntries step entries, kMaxEnds prologue/epilogue pairs per
// entry): calls that cycle through more batch shapes and history lengths than are kept evict and re-capture,
// and every call still draws what eager mode draws.
TEST(KronosGpu, EvictionsKeepResultsEqualToEager) {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    auto eager = cuda_model("tiny_a", CN_MODE_EAGER), graph = cuda_model("tiny_a", CN_MODE_GRAPH);
    size_t eq = 0, n = 0;
    // 10 sample counts (10 batch shapes > 8 entries), then 6 history lengths for one shape (> 4 ends), twice.
    std::vector<std::pair<int, int>> calls;  // (sample_count, cut of the history)
    for (int rep = 0; rep < 2; ++rep) {
        for (int s = 1; s <= 10; ++s) calls.push_back({s, 0});
        for (int cut = 0; cut < 6; ++cut) calls.push_back({1, cut});
    }
    for (const auto& [samples, cut] : calls) {
        nlohmann::json x = case_cut("a_top_p", cut);
        ASSERT_FALSE(x.is_null());
        x["sample_count"] = samples;
        const cn::ForecastRequest req = cn::test::kronos_request(x);
        count_equal(traced(*eager, req, 11), traced(*graph, req, 11), eq, n);
    }
    EXPECT_GE(static_cast<double>(eq), 0.95 * n) << eq << " of " << n;
    cn_model_info info{};
    info.struct_size = sizeof(info);
    graph->fill_info(info);
    EXPECT_GT(info.graph_pool_bytes, 0u);
    EXPECT_LT(info.graph_pool_bytes, uint64_t{4} << 30) << "graph pools not released on eviction";
}

// Horizons beyond KronosGraphs::kMaxWholeSteps replay the prologue, the step graph per bar and the epilogue
// instead of one whole-call graph: that path must draw what eager mode draws too. The fixture model with a
// longer max_context (a copy of tiny_a whose config allows it), horizon kMaxWholeSteps + 16.
TEST(KronosGpu, LongHorizonsReplayTheStepGraphAndAgreeWithEager) {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    const int64_t P = kWholeSteps + 16;
    // A directory with tiny_a's weights (symbolic links) and its config with max_context 160.
    char tmpl[] = "/tmp/cn_kronos_long_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl, src = std::string(CN_FIXTURES_DIR) + "/kronos/tiny_a";
    ASSERT_EQ(::symlink((src + "/model.safetensors").c_str(), (dir + "/model.safetensors").c_str()), 0);
    ASSERT_EQ(::symlink((src + "/tokenizer").c_str(), (dir + "/tokenizer").c_str()), 0);
    nlohmann::json cfg;
    {
        std::ifstream in(src + "/config.json");
        cfg = nlohmann::json::parse(in);
    }
    cfg["max_context"] = 160;
    {
        std::ofstream out(dir + "/config.json");
        out << cfg.dump();
    }
    nlohmann::json x = case_cut("a_top_p", 0);
    ASSERT_FALSE(x.is_null());
    x["pred_len"] = P;
    for (auto& s : x["series"]) {
        auto& h = s["history_ts"];
        const int64_t step = h[h.size() - 1].get<int64_t>() - h[h.size() - 2].get<int64_t>();
        nlohmann::json fut = nlohmann::json::array();
        for (int64_t i = 1; i <= P; ++i) fut.push_back(h[h.size() - 1].get<int64_t>() + i * step);
        s["future_ts"] = fut;
    }
    const cn::ForecastRequest req = cn::test::kronos_request(x);
    cn::ModelOptions o;
    o.device = c10::Device(c10::kCUDA, 0);
    auto eager = cn::load_model(dir, o), graph = cn::load_model(dir, o);
    eager->set_mode(CN_MODE_EAGER);
    graph->set_mode(CN_MODE_GRAPH);
    const auto a = traced(*eager, req, 5), b = traced(*graph, req, 5);
    ASSERT_EQ(a.s1.size(), b.s1.size());
    ASSERT_EQ(a.s1[0].size(), static_cast<size_t>(P));
    size_t eq = 0, n = 0;
    count_equal(a, b, eq, n);
    std::printf("[ kronos   ] horizon %lld, step-graph path: graph tokens equal to eager %zu/%zu\n", static_cast<long long>(P), eq, n);
    EXPECT_GE(static_cast<double>(eq), 0.95 * n) << eq << " of " << n;
    for (const char* f : {"/model.safetensors", "/tokenizer", "/config.json"}) ::unlink((dir + f).c_str());
    ::rmdir(dir.c_str());
}
