#include "kernels/rows_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/frac.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublasLt.h>

#include "core/common/status.h"
#include "kernels/rows_gemm_mma.h"

namespace cn::kernels {
namespace {

// The row count the configuration is chosen for (cuBLASLt's heuristic answer for that many rows); every other row
// count runs the same configuration. CN_ROWS_GEMM_REFERENCE_ROWS overrides it, for benchmarks only (it is part of
// the arithmetic: a different configuration rounds differently).
// Measured on an H100 (docs/benchmarks.md, #19 section): for bf16/f16, 544 rows (16 series of Chronos-2 at
// context 512) picks a configuration as fast as the large-batch one at 1024 series and twice as fast at 1; for
// f32 (no tensor cores: exact fp32) 16384 (at 544 cuBLASLt offers no configuration valid for every row count).
int64_t reference_rows(at::ScalarType dt) {
    static const int64_t over = [] {
        const char* v = std::getenv("CN_ROWS_GEMM_REFERENCE_ROWS");
        const long long r = v ? std::atoll(v) : 0;
        return r >= 1 && r <= (1LL << 24) ? static_cast<int64_t>(r) : int64_t{0};
    }();
    if (over > 0) return over;
    return dt == at::kFloat ? 16384 : 544;
}
// The most workspace a configuration may use (allocated per call from the caching allocator, so concurrent calls
// on other streams never share it, and CUDA graph capture takes it from the graph's pool).
constexpr uint64_t kMaxWorkspace = uint64_t{32} << 20;
// A tier's candidate replaces the base only when it runs in under this fraction of the base's time (timing noise on
// GEMMs of a few µs is a few %: a near-tie stays on the base, the same choice in every process).
constexpr float kMargin = 0.95f;

void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        fail(Status::kInternal, std::string("rows_gemm: ") + what + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)));
}

cudaDataType_t cuda_type(at::ScalarType t) {
    switch (t) {
        case at::kFloat: return CUDA_R_32F;
        case at::kBFloat16: return CUDA_R_16BF;
        case at::kHalf: return CUDA_R_16F;
        default: fail(Status::kInternal, "rows_gemm: dtype must be f32, bf16 or f16");
    }
}

// What the epilogue does after the fp32 product: + bias [N], ReLU, + the output's previous contents (accumulate:
// beta = 1, C = D = out), in cuBLASLt's order (alpha AB + beta C + bias, then ReLU), rounded once to the dtype.
struct Epilogue {
    const void* bias = nullptr;
    bool relu = false;
    bool accumulate = false;
};

// Descriptors of one GEMM in column-major terms: D [N, M] = op(A)=W^T... i.e. A = W viewed as K x N (ld K),
// transposed; B = X viewed as K x M (ld = row stride); C = D = out viewed as N x M (ld N).
struct Descs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    bool accumulate = false;  // beta = 1: D = AB + C with C = D
    Descs(at::ScalarType dt, int64_t N, int64_t K, int64_t M, int64_t ldx, const Epilogue& ep) {
        const cudaDataType_t t = cuda_type(dt);
        const void* bias = ep.bias;
        const bool relu = ep.relu;
        accumulate = ep.accumulate;
        check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
        const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "set TRANSA");
        check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "set TRANSB");
        if (bias || relu) {
            const cublasLtEpilogue_t e = bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS) : CUBLASLT_EPILOGUE_RELU;
            check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)), "set EPILOGUE");
        }
        if (bias) check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), "set BIAS_POINTER");
        check(cublasLtMatrixLayoutCreate(&a, t, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K), "layout A");
        check(cublasLtMatrixLayoutCreate(&b, t, static_cast<uint64_t>(K), static_cast<uint64_t>(M), ldx), "layout B");
        check(cublasLtMatrixLayoutCreate(&c, t, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N), "layout C");
    }
    ~Descs() {
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
    Descs(const Descs&) = delete;
    Descs& operator=(const Descs&) = delete;
};

using Key = std::tuple<int, int, int64_t, int64_t, bool, bool, bool>;  // device, dtype, N, K, bias, ReLU, accumulate

// A cuBLASLt configuration, or (own_cols > 0) the variant of rows_gemm's own small-call kernel with that many columns
// per block (kernels/rows_gemm_mma.h).
struct Config {
    cublasLtMatmulAlgo_t algo{};
    size_t workspace = 0;
    int own_cols = 0;
    bool own() const { return own_cols > 0; }
};

// A row-count tier: calls of [min_rows, max_rows] rows may run another configuration than the base one: a candidate
// from cuBLASLt's heuristic at ref_rows rows (f32: also the base algorithm with its other tiles), kept only when it
// gives the same bits as the base and is faster: each is run on a probe of probe_rows rows (a fixed pseudo-random
// matrix and the real weight), every output must be bit-identical (configurations that differ in tile shape and
// raster, not in the K order of a row's dot products, are), and the fastest of those, timed at min(ref_rows,
// probe_rows) rows, wins if it beats the base by kMargin.
// The probe may hold fewer rows than the tier serves (f32's 16384+ tier: 8192), which assumes, as the whole design
// does, that a configuration's per-row arithmetic does not depend on the row count. Measured, docs/benchmarks.md:
// the bf16 base configuration (chosen at 544 rows) is 20-30 % slower than cuBLAS's own choice at tens of thousands
// of rows for some layers, and slower at one series' 34 rows.
struct TierSpec {
    int64_t min_rows, max_rows, ref_rows, probe_rows;
    const char* env;  // "0" there turns the tier off (for measuring; one variable may switch several tiers), read
                      // when a weight shape is first met
};
// bf16/f16: the base is chosen at 544 rows.
constexpr TierSpec kHalfTiers[] = {
    // One series of Chronos-2 at context 512 (verified on 68 rows, timed on 34); two series; 3-8 series. Two series and
    // 3-8 had tiers of 1-68 and 69-1088 rows chosen at 34 and 544 until #19's eleventh step, which ran FF out at 68 rows
    // in 10.7 us and time QKV at 136 in 5.8 (docs/benchmarks.md).
    {1, 34, 34, 68, "CN_ROWS_GEMM_SMALL"},
    {35, 68, 68, 68, "CN_ROWS_GEMM_SMALL"},
    {69, 272, 136, 136, "CN_ROWS_GEMM_MID"},
    {273, 1088, 544, 544, "CN_ROWS_GEMM_MID"},            // 9-32 series: the base's own row count, its heuristic's other answers
    {1089, 4095, 2176, 2176, "CN_ROWS_GEMM_MID"},         // 33-120 series
    {4096, INT64_MAX, 8704, 8704, "CN_ROWS_GEMM_LARGE"},  // 121 series and more; 8704 rows: a full batch of 256 series
};
// bf16/f16 candidates per tier: cuBLASLt's first split-K-free answers at the tier's row count (its first answer is not
// always the fastest of them). Measured on the H100: 4 or 8 ran the fused sweep within the run-to-run spread, the
// choice taking ~10 ms more per weight shape with 8.
constexpr size_t kHalfCandidates = 8;
// f32 (exact fp32: SIMT kernels, no tensor cores): the base is chosen at 16384 rows (a large tile, 5x slower than a
// small one on 34 rows), so every range has a tier of its own; a tier whose probe fails falls back to the base.
constexpr TierSpec kFloatTiers[] = {
    {1, 68, 34, 68, "CN_ROWS_GEMM_SMALL"},           {69, 1088, 544, 544, "CN_ROWS_GEMM_MID"},               // 3-32 series
    {1089, 4095, 2176, 2176, "CN_ROWS_GEMM_MID"},                                                            // 33-120 series
    {4096, 16383, 8192, 4096, "CN_ROWS_GEMM_LARGE"}, {16384, INT64_MAX, 32768, 8192, "CN_ROWS_GEMM_LARGE"},  // 482 series and more
};
constexpr int kMaxTiers = 6;

struct Tiers {
    const TierSpec* spec;
    int count;
};
Tiers tiers_for(at::ScalarType dt) {
    if (dt == at::kFloat) return {kFloatTiers, static_cast<int>(sizeof(kFloatTiers) / sizeof(kFloatTiers[0]))};
    return {kHalfTiers, static_cast<int>(sizeof(kHalfTiers) / sizeof(kHalfTiers[0]))};
}
static_assert(sizeof(kFloatTiers) / sizeof(kFloatTiers[0]) <= kMaxTiers && sizeof(kHalfTiers) / sizeof(kHalfTiers[0]) <= kMaxTiers);

// Whether the small tiers (up to kMmaMaxRows rows) may offer rows_gemm's own kernel as a candidate: yes unless CN_ROWS_GEMM_OWN=0 (read when a
// weight shape is first met; for measuring: any candidate that is used gives the base's bits).
bool own_kernel_enabled() {
    const char* e = std::getenv("CN_ROWS_GEMM_OWN");
    return !(e && std::string(e) == "0");
}

// CN_ROWS_GEMM_SEARCH=1 (read when a weight shape is first met; a measuring tool, not for serving: about 20 s per
// weight shape): a bf16/f16 tier's candidates are its heuristic's first 32 answers and every tile with every custom
// option of the first answer's algorithm (its stages, cluster shape and swizzle kept). Measured on the H100
// (docs/benchmarks.md, #19 tenth step; with an earlier form that also took the heuristic's answers at 1/4-4x the
// tier's row count): 1107-1274 configurations per Chronos-2 weight shape and tier, every one with the base's bits;
// the fastest of them took single GEMMs up to 15 % less time than the fastest of the heuristic's first eight (ff wo
// at 8704 rows: 54.6 against 64.5 us), but fused calls were no faster beyond the run-to-run spread, so the default
// search stays the heuristic's answers.
bool full_search() {
    const char* e = std::getenv("CN_ROWS_GEMM_SEARCH");
    return e && std::string(e) == "1";
}

bool tier_enabled(const TierSpec& spec) {
    const char* e = std::getenv(spec.env);  // read when a weight's configurations are chosen (once per weight shape)
    return !(e && std::string(e) == "0");
}

// The base configuration every row count may run, and the verified tier configurations.
struct Choice {
    Config base;
    Tiers tiers{nullptr, 0};
    bool has_tier[kMaxTiers] = {};
    Config tier[kMaxTiers];
    std::string description;

    const Config& for_rows(int64_t M) const {
        for (int t = 0; t < tiers.count; ++t) {
            if (has_tier[t] && M >= tiers.spec[t].min_rows && M <= tiers.spec[t].max_rows) return tier[t];
        }
        return base;
    }
};

std::string describe(const cublasLtMatmulAlgo_t& algo) {
    auto attr = [&](cublasLtMatmulAlgoConfigAttributes_t a) {
        int64_t v = 0;
        size_t written = 0;
        uint32_t small = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &small, sizeof(small), &written) == CUBLAS_STATUS_SUCCESS && written == 4)
            return int64_t{small};
        if (cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &v, sizeof(v), &written) == CUBLAS_STATUS_SUCCESS) return v;
        return int64_t{-1};
    };
    return "algo " + std::to_string(attr(CUBLASLT_ALGO_CONFIG_ID)) + ", tile " + std::to_string(attr(CUBLASLT_ALGO_CONFIG_TILE_ID)) +
           ", stages " + std::to_string(attr(CUBLASLT_ALGO_CONFIG_STAGES_ID)) + ", split-K " +
           std::to_string(attr(CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + ", reduction " +
           std::to_string(attr(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)) + ", swizzle " +
           std::to_string(attr(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)) + ", custom " +
           std::to_string(attr(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION)) + ", cluster " +
           std::to_string(attr(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

std::string describe(const Config& c) {
    return c.own() ? "cutenative mma kernel, " + std::to_string(c.own_cols) + " columns per block (kernels/rows_gemm_mma.h)"
                   : describe(c.algo);
}

// Whether `algo` runs every row count in `check_rows` within kMaxWorkspace; raises `workspace` to the largest any of
// them needs. `why` (optional) collects the refusal.
bool valid_for(at::ScalarType dt, int64_t N, int64_t K, const Epilogue& ep, cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo,
               std::initializer_list<int64_t> check_rows, size_t& workspace, std::string* why) {
    for (int64_t m : check_rows) {
        Descs dm(dt, N, K, m, K, ep);
        cublasLtMatmulHeuristicResult_t r{};
        const cublasStatus_t c = cublasLtMatmulAlgoCheck(handle, dm.op, dm.a, dm.b, dm.c, dm.c, &algo, &r);
        if (c != CUBLAS_STATUS_SUCCESS || r.workspaceSize > kMaxWorkspace) {
            if (why) {
                *why += " [" + describe(algo) + ": " + std::to_string(m) + " rows: status " + std::to_string(static_cast<int>(c)) +
                        ", workspace " + std::to_string(r.workspaceSize) + "]";
            }
            return false;
        }
        workspace = std::max(workspace, r.workspaceSize);
    }
    return true;
}

// The first of cuBLASLt's heuristic answers at `ref_rows` rows that does not split K and is valid for every row count
// in `check_rows`; its workspace is the largest any of those row counts needs (a per-call allocation of that size;
// split-K is what would make a workspace change the arithmetic, and it is excluded). `why` collects the refusals.
// no_reduction: ask the heuristic for split-K-free answers only (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK); where
// its unrestricted answers for few rows are all split-K (f32 with N 768: measured on the H100), this finds the best
// of the others.
// find_configs: the first `max_count` such answers, in the heuristic's order.
std::vector<Config> find_configs(at::ScalarType dt, int64_t N, int64_t K, const Epilogue& ep, cublasLtHandle_t handle, int64_t ref_rows,
                                 std::initializer_list<int64_t> check_rows, std::string& why, int& found, size_t max_count,
                                 bool no_reduction = false) {
    Descs d(dt, N, K, ref_rows, K, ep);
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kMaxWorkspace, sizeof(kMaxWorkspace)),
          "set MAX_WORKSPACE");
    if (no_reduction) {
        const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
        check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof(mask)),
              "set REDUCTION_SCHEME_MASK");
    }
    std::vector<cublasLtMatmulHeuristicResult_t> results(32);
    std::vector<Config> out;
    found = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.c, d.c, pref, static_cast<int>(results.size()), results.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(s, "cublasLtMatmulAlgoGetHeuristic");
    for (int i = 0; i < found; ++i) {
        cublasLtMatmulAlgo_t algo = results[static_cast<size_t>(i)].algo;
        uint32_t split = 1;
        size_t written = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof(split), &written);
        if (split > 1) {
            why += " [" + describe(algo) + ": split-K]";
            continue;
        }
        size_t workspace = results[static_cast<size_t>(i)].workspaceSize;
        if (!valid_for(dt, N, K, ep, handle, algo, check_rows, workspace, &why)) continue;
        out.push_back(Config{algo, workspace});
        if (out.size() >= max_count) break;
    }
    return out;
}

bool find_config(at::ScalarType dt, int64_t N, int64_t K, const Epilogue& ep, cublasLtHandle_t handle, int64_t ref_rows,
                 std::initializer_list<int64_t> check_rows, Config& out, std::string& why, int& found, bool no_reduction = false) {
    const std::vector<Config> c = find_configs(dt, N, K, ep, handle, ref_rows, check_rows, why, found, 1, no_reduction);
    if (c.empty()) return false;
    out = c.front();
    return true;
}

// The configuration `base`'s algorithm with each tile it supports (stages, split-K 1 and the rest as the base's),
// valid for every row count in `check_rows`; with_custom_options: each tile also with every custom option the
// algorithm takes (bf16/f16 with CN_ROWS_GEMM_SEARCH=1). cuBLASLt's exact-fp32 kernels (one algorithm, SIMT FMA, a K
// depth of 8 per stage for every tile) compute each output by the same chain of FMAs over k whatever the tile; its
// Hopper bf16 algorithm (66) gave the base's bits with every tile and option it accepted on the H100 (see
// full_search). Each variant is still verified on the probe before it is used.
std::vector<Config> tile_variants(const Config& base, at::ScalarType dt, int64_t N, int64_t K, const Epilogue& ep, cublasLtHandle_t handle,
                                  std::initializer_list<int64_t> check_rows, bool with_custom_options = false) {
    size_t bytes = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&base.algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS) return {};
    std::vector<uint32_t> tiles(bytes / sizeof(uint32_t));
    if (tiles.empty() ||
        cublasLtMatmulAlgoCapGetAttribute(&base.algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS) {
        return {};
    }
    int32_t max_custom = 0;
    size_t written = 0;
    if (with_custom_options && cublasLtMatmulAlgoCapGetAttribute(&base.algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &max_custom,
                                                                 sizeof(max_custom), &written) != CUBLAS_STATUS_SUCCESS)
        max_custom = 0;
    max_custom = std::clamp(max_custom, 0, 15);
    std::vector<Config> out;
    for (uint32_t tile : tiles) {
        if (tile == CUBLASLT_MATMUL_TILE_UNDEFINED) continue;  // would let cuBLASLt pick a tile per problem size
        for (uint32_t custom = 0; custom <= static_cast<uint32_t>(max_custom); ++custom) {
            Config v = base;
            if (cublasLtMatmulAlgoConfigSetAttribute(&v.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile)) != CUBLAS_STATUS_SUCCESS)
                continue;
            if (with_custom_options && cublasLtMatmulAlgoConfigSetAttribute(&v.algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom,
                                                                            sizeof(custom)) != CUBLAS_STATUS_SUCCESS)
                continue;
            v.workspace = 0;
            if (valid_for(dt, N, K, ep, handle, v.algo, check_rows, v.workspace, nullptr)) out.push_back(v);
        }
    }
    return out;
}

// One cublasLtMatmul of configuration `c` with descriptors `d` (x [M, K] -> out [M, N]) on `stream` (the current one
// by default).
void matmul(const Descs& d, const Config& c, cublasLtHandle_t handle, const at::Tensor& x, const at::Tensor& w, const at::Tensor& out,
            const at::Tensor& workspace, size_t ws, cudaStream_t stream = nullptr) {
    const float alpha = 1.0f, beta = d.accumulate ? 1.0f : 0.0f;
    check(cublasLtMatmul(handle, d.op, &alpha, w.const_data_ptr(), d.a, x.const_data_ptr(), d.b, &beta, out.data_ptr(), d.c, out.data_ptr(),
                         d.c, &c.algo, workspace.defined() ? workspace.data_ptr() : nullptr, ws,
                         stream ? stream : at::cuda::getCurrentCUDAStream().stream()),
          "cublasLtMatmul");
}

// The stream the searches time on: rows_gemm's own per device (created once, never destroyed), so no other work can
// land on it while a timing graph is captured there (ATen's pool streams are shared round-robin by every thread).
// Used under choose()'s search lock only.
cudaStream_t timing_stream(int device) {
    static std::map<int, cudaStream_t> streams;
    auto it = streams.find(device);
    if (it != streams.end()) return it->second;
    cudaStream_t s = nullptr;
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    streams.emplace(device, s);
    return s;
}

// A CUDA graph of `runs` back-to-back GEMMs, captured on `stream` (thread-local capture mode: this thread's other
// CUDA calls are checked, other threads' are not); the capture is ended and every handle released on every path.
struct TimingGraph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    TimingGraph(cudaStream_t stream, int runs, const std::function<void(cudaStream_t)>& one) {
        C10_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        try {
            for (int i = 0; i < runs; ++i) one(stream);
        } catch (...) {
            cudaGraph_t g = nullptr;
            (void)cudaStreamEndCapture(stream, &g);
            if (g) (void)cudaGraphDestroy(g);
            (void)cudaGetLastError();
            throw;
        }
        C10_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
        if (e != cudaSuccess) {
            (void)cudaGraphDestroy(graph);
            graph = nullptr;
            exec = nullptr;
            C10_CUDA_CHECK(e);
        }
    }
    ~TimingGraph() {
        if (exec) (void)cudaGraphExecDestroy(exec);
        if (graph) (void)cudaGraphDestroy(graph);
    }
    TimingGraph(const TimingGraph&) = delete;
    TimingGraph& operator=(const TimingGraph&) = delete;
};

// The own kernel's variant of `cols` columns, on `stream` (null: the current one), where it takes the operands; false
// where it does not.
bool run_own(int cols, const at::Tensor& x, const at::Tensor& w, const Epilogue& ep, const at::Tensor& out, cudaStream_t stream) {
    using rows_gemm_detail::MmaAdd;
    const int64_t N = w.size(0), K = w.size(1), M = x.size(0);
    if (!rows_gemm_detail::mma_takes(x.scalar_type(), M, N, K, cols, x.const_data_ptr(), w.const_data_ptr(), out.const_data_ptr()))
        return false;
    const MmaAdd add = ep.accumulate ? MmaAdd::kAddRounded : MmaAdd::kNone;
    rows_gemm_detail::mma_gemm(x.scalar_type(), x.const_data_ptr(), w.const_data_ptr(), ep.bias, out.data_ptr(), M, N, K, ep.relu, add,
                               cols, stream ? stream : at::cuda::getCurrentCUDAStream().stream());
    return true;
}

// out [M, N] = x [M, K] (row-major, 16-byte-aligned rows) W^T (+ b, ReLU) with configuration `c`; M within the row
// counts `c` was checked for, or checked here. An own-kernel configuration whose kernel does not take the operands
// runs `fallback` instead (the base configuration: the same bits).
void run_config(const Config& c, cublasLtHandle_t handle, const at::Tensor& x, const at::Tensor& w, const Epilogue& ep,
                const at::Tensor& out, const Config* fallback = nullptr) {
    if (c.own()) {
        if (run_own(c.own_cols, x, w, ep, out, nullptr)) return;
        if (!fallback) fail(Status::kInternal, "rows_gemm: the own kernel does not take these operands");
        return run_config(*fallback, handle, x, w, ep, out);
    }
    const int64_t N = w.size(0), K = w.size(1), M = x.size(0);
    Descs d(x.scalar_type(), N, K, M, K, ep);
    size_t ws = c.workspace;
    if (M > 65536) {  // beyond the row counts checked at choice time: check this one (same configuration)
        cublasLtMatmulHeuristicResult_t r{};
        check(cublasLtMatmulAlgoCheck(handle, d.op, d.a, d.b, d.c, d.c, &c.algo, &r), "cublasLtMatmulAlgoCheck");
        ws = std::max(ws, r.workspaceSize);
    }
    const at::Tensor workspace = ws > 0 ? at::empty({static_cast<int64_t>(ws)}, x.options().dtype(at::kByte)) : at::Tensor();
    matmul(d, c, handle, x, w, out, workspace, ws);
}

// Mean GPU time of one run of configuration `c` on x (M <= 65536 rows), in ms; the caller has just run it once (no
// warm-up here). Descriptors and workspace are made once, outside the timed span. A GEMM of 200 µs or more is timed
// over 2 runs queued on the stream; a shorter one as fused mode runs it, inside a CUDA graph (4-32 runs, ~2 ms of
// work, the graph replayed twice and the second replay timed): queued from the host one by one, a GEMM of a few µs
// times the host's launch rate instead (measured on the H100: 8-13 µs per call at 34 rows against 3.6-5 µs in a
// graph), which would rank configurations by noise.
float time_config(const Config& c, cublasLtHandle_t handle, const at::Tensor& x, const at::Tensor& w, const Epilogue& ep,
                  const at::Tensor& out) {
    const int64_t N = w.size(0), K = w.size(1), M = x.size(0);
    const bool own = c.own();
    Descs d(x.scalar_type(), N, K, M, K, ep);
    const at::Tensor workspace =
        !own && c.workspace > 0 ? at::empty({static_cast<int64_t>(c.workspace)}, x.options().dtype(at::kByte)) : at::Tensor();
    // rows_gemm's own stream (a capture cannot run on the legacy default stream), ordered after the current one's
    // work; on every exit, its work is waited for before the tensors it uses (allocated on the current stream) are
    // freed.
    const at::cuda::CUDAStream current = at::cuda::getCurrentCUDAStream();
    const at::cuda::CUDAStream stream = at::cuda::getStreamFromExternal(timing_stream(x.device().index()), x.device().index());
    struct WaitOnExit {
        cudaStream_t s;
        ~WaitOnExit() { (void)cudaStreamSynchronize(s); }
    } wait_on_exit{stream.stream()};
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(stream);
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);  // timing events, destroyed on every path
    auto one = [&](cudaStream_t s) {
        if (!own) return matmul(d, c, handle, x, w, out, workspace, c.workspace, s);
        if (!run_own(c.own_cols, x, w, ep, out, s)) fail(Status::kInternal, "rows_gemm: the own kernel does not take the probe");
    };
    start.record(stream);
    for (int i = 0; i < 2; ++i) one(stream.stream());
    stop.record(stream);
    stop.synchronize();
    const float queued = start.elapsed_time(stop) / 2.0f;
    if (queued >= 0.2f) return queued;
    const int runs = std::clamp(static_cast<int>(2.0f / std::max(queued, 0.001f)), 4, 32);
    const TimingGraph g(stream.stream(), runs, one);
    C10_CUDA_CHECK(cudaGraphLaunch(g.exec, stream.stream()));
    start.record(stream);
    C10_CUDA_CHECK(cudaGraphLaunch(g.exec, stream.stream()));
    stop.record(stream);
    stop.synchronize();
    return start.elapsed_time(stop) / static_cast<float>(runs);
}

// A probe matrix [rows, cols]: m[i] = frac(i * step) * 2 - 1 in fp32, rounded to the options' dtype (no RNG state
// touched).
at::Tensor probe_matrix(int64_t rows, int64_t cols, double step, const at::TensorOptions& options) {
    return ((at::arange(rows * cols, options.dtype(at::kFloat)) * step).frac() * 2.0 - 1.0)
        .to(options.dtype().toScalarType())
        .view({rows, cols});
}

// The configurations for this weight: the base one for every row count (cuBLASLt's first split-K-free answer at
// reference_rows(dtype) rows valid for 1, 34 and 65536 rows), and each tier's when verified on its probe and faster
// there. Chosen once per key, then fixed. The probes need a synchronisation: outside CUDA graph capture only (a key first met
// while capturing keeps the base configuration alone).
// Locking: `mu` guards the cache for lookups and inserts only; `search_mu` serialises the searches (and the timing
// stream), so a call whose weight shape is already chosen never waits for another shape's search.
const Choice& choose(const at::Tensor& w, const Epilogue& ep, cublasLtHandle_t handle) {
    static std::mutex mu, search_mu;
    static std::map<Key, Choice> cache;  // entries never move or leave: references stay valid
    const at::ScalarType dt = w.scalar_type();
    const int64_t N = w.size(0), K = w.size(1);
    const Key key{w.device().index(), static_cast<int>(dt), N, K, ep.bias != nullptr, ep.relu, ep.accumulate};
    auto cached = [&]() -> const Choice* {
        std::lock_guard<std::mutex> lock(mu);
        auto it = cache.find(key);
        return it == cache.end() ? nullptr : &it->second;
    };
    if (const Choice* hit = cached()) return *hit;
    std::lock_guard<std::mutex> searching(search_mu);
    if (const Choice* hit = cached()) return *hit;  // chosen by another thread meanwhile
    Choice c;
    std::string why;
    int found = 0;
    if (!find_config(dt, N, K, ep, handle, reference_rows(dt), {1, 34, 65536}, c.base, why, found)) {
        fail(Status::kInternal, "rows_gemm: cuBLASLt offers no split-K-free configuration valid for every row count (N " +
                                    std::to_string(N) + ", K " + std::to_string(K) + ", " + std::to_string(found) + " candidates:" + why +
                                    ")");
    }
    c.description = describe(c.base.algo) + ", workspace " + std::to_string(c.base.workspace);
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(at::cuda::getCurrentCUDAStream(), &capturing));
    c.tiers = tiers_for(dt);
    for (int t = 0; t < c.tiers.count && capturing == cudaStreamCaptureStatusNone; ++t) {
        const TierSpec& spec = c.tiers.spec[t];
        if (!tier_enabled(spec)) continue;
        const std::string rows =
            std::to_string(spec.min_rows) + "-" + (spec.max_rows == INT64_MAX ? std::string() : std::to_string(spec.max_rows)) + " rows ";
        // A tier is optional: a failed query or candidate run (cuBLASLt may answer NOT_SUPPORTED to a preference no
        // configuration meets) leaves this tier to the base configuration instead of failing the weight.
        try {
            // Timed at the tier's own row count where the probe holds that many rows (34 for one series, not the
            // probe's 68: the two can rank configurations differently), verified on the whole probe.
            const int64_t timed_rows = std::min(spec.ref_rows, spec.probe_rows);
            const std::initializer_list<int64_t> tier_rows = {spec.min_rows, timed_rows, spec.probe_rows,
                                                              std::min<int64_t>(spec.max_rows, 65536)};
            // Candidates: cuBLASLt's first split-K-free answer at the tier's row count (bf16/f16: its first
            // kHalfCandidates, or with CN_ROWS_GEMM_SEARCH=1 its first 32 and every tile and custom option of the first
            // one's algorithm); for f32 also its best answer among split-K-free configurations only (where all its first
            // answers split K) and the base algorithm's other tiles.
            std::string unused;
            const bool full = dt != at::kFloat && full_search();
            const size_t n_answers = dt == at::kFloat ? 1 : full ? 32 : kHalfCandidates;
            std::vector<Config> cands = find_configs(dt, N, K, ep, handle, spec.ref_rows, tier_rows, unused, found, n_answers);
            Config h;
            if (dt == at::kFloat) {
                if (find_config(dt, N, K, ep, handle, spec.ref_rows, tier_rows, h, unused, found, /*no_reduction=*/true))
                    cands.push_back(h);
                for (const Config& v : tile_variants(c.base, dt, N, K, ep, handle, tier_rows)) cands.push_back(v);
            } else if (full) {
                const Config first = cands.empty() ? c.base : cands.front();
                for (const Config& v : tile_variants(first, dt, N, K, ep, handle, tier_rows, /*with_custom_options=*/true))
                    cands.push_back(v);
            }
            // The own small-call kernel's variants (bf16/f16, the small tiers), where they take the probe's shape (the
            // probe's operands are allocated, hence aligned, like w).
            for (int cols : rows_gemm_detail::kMmaColVariants) {
                if (dt != at::kFloat && spec.max_rows <= rows_gemm_detail::kMmaMaxRows && own_kernel_enabled() &&
                    rows_gemm_detail::mma_takes(dt, spec.probe_rows, N, K, cols, w.const_data_ptr(), w.const_data_ptr(),
                                                w.const_data_ptr())) {
                    Config o;
                    o.own_cols = cols;
                    cands.push_back(o);
                }
            }
            std::vector<std::string> seen{describe(c.base)};
            std::vector<Config> unique;
            for (const Config& x : cands) {
                const std::string d = describe(x);
                if (std::find(seen.begin(), seen.end(), d) == seen.end()) seen.push_back(d), unique.push_back(x);
            }
            if (unique.empty()) continue;  // nothing but the base
            const int64_t P = spec.probe_rows;
            const at::Tensor x = probe_matrix(P, K, 0.7548776662, w.options());
            const at::Tensor a = at::empty({P, N}, w.options()), b = at::empty({P, N}, w.options());
            // Accumulating configurations add the output's previous contents: the same pseudo-random C in both.
            const at::Tensor c0 = ep.accumulate ? probe_matrix(P, N, 0.5698402910, w.options()) : at::Tensor();
            if (ep.accumulate) a.copy_(c0);
            run_config(c.base, handle, x, w, ep, a);
            auto same_bits = [&](const Config& cand) {
                if (ep.accumulate) b.copy_(c0);
                run_config(cand, handle, x, w, ep, b);
                return at::equal(a.view(at::kShort), b.view(at::kShort));  // bitwise (an integer view: NaN and -0 compare as bits)
            };
            // The fastest at timed_rows of the candidates that give the base's bits, if it beats the base by kMargin
            // (timed at choice time; any of them gives the same bits, so which one wins does not change a result, but
            // a choice decided by timing noise would make the speed differ between processes: the margin, and the
            // base timed before and after the candidates (its faster time counts), keep near-ties on the base).
            const at::Tensor x_timed = x.slice(0, 0, timed_rows), a_timed = a.slice(0, 0, timed_rows), b_timed = b.slice(0, 0, timed_rows);
            std::vector<std::pair<const Config*, float>> timed;
            int refused = 0;
            for (const Config& cand : unique) {
                if (!same_bits(cand)) {
                    ++refused;
                    continue;
                }
                timed.emplace_back(&cand, 0.0f);
            }
            float base_ms = time_config(c.base, handle, x_timed, w, ep, a_timed);
            for (auto& [cand, ms] : timed) ms = time_config(*cand, handle, x_timed, w, ep, b_timed);
            if (!timed.empty()) base_ms = std::min(base_ms, time_config(c.base, handle, x_timed, w, ep, a_timed));
            float best_ms = base_ms;
            std::string own_note;  // the own kernel's time, chosen or not (for benchmarks)
            for (const auto& [cand, ms] : timed) {
                if (cand->own()) {
                    char b[80];
                    std::snprintf(b, sizeof(b), ", own kernel (%d columns) %.1f us", cand->own_cols, ms * 1e3);
                    own_note += b;
                }
                if (ms < best_ms && ms < base_ms * kMargin) {
                    best_ms = ms;
                    c.has_tier[t] = true;
                    c.tier[t] = *cand;
                }
            }
            const int verified = static_cast<int>(timed.size());
            char timing[320];
            if (c.has_tier[t]) {
                std::snprintf(
                    timing, sizeof(timing),
                    " (the fastest at %lld rows of %d candidates with the base's bits, %d refused: %.1f us against the base's %.1f%s)",
                    static_cast<long long>(timed_rows), verified, refused, best_ms * 1e3, base_ms * 1e3, own_note.c_str());
                c.description += "; " + rows + describe(c.tier[t]) + ", workspace " + std::to_string(c.tier[t].workspace) + timing;
            } else {
                std::snprintf(timing, sizeof(timing),
                              " (%d candidates with the base's bits, none %.0f %% faster at %lld rows than its %.1f us; %d refused%s)",
                              verified, (1.0 - kMargin) * 100.0, static_cast<long long>(timed_rows), base_ms * 1e3, refused,
                              own_note.c_str());
                c.description += "; " + rows + "the base" + timing;
            }
        } catch (const std::exception& e) {
            c.has_tier[t] = false;
            c.description += "; " + rows + "the base (the tier's search failed: " + e.what() + ")";
        }
    }
    std::lock_guard<std::mutex> lock(mu);
    return cache.emplace(key, c).first->second;
}

}  // namespace

bool rows_gemm_enabled(at::ScalarType dtype) {
    static const int setting = [] {  // -1: the default (on), 0: off, 1: on
        const char* v = std::getenv("CN_ROWS_GEMM");
        if (v && std::string(v) == "1") return 1;
        if (v && std::string(v) == "0") return 0;
        return -1;
    }();
    (void)dtype;  // every dtype by default since the f32 tiers (docs/benchmarks.md, #19 fourth step)
    return setting != 0;
}

namespace {

// rows_gemm and rows_gemm_accumulate: `out` is a new tensor, or (accumulate) the caller's, added to.
void rows_gemm_into(const at::Tensor& x_in, const at::Tensor& w, const at::Tensor& b, bool relu, bool accumulate, const at::Tensor& out) {
    const int64_t K = w.size(1);
    const int64_t M = x_in.numel() / K;
    if (M == 0) return;
    // A row-major [M, K] matrix with 16-byte-aligned rows and base (cuBLASLt's fast paths want it, and the
    // configuration was checked for it).
    at::Tensor x = x_in.reshape({M, K});
    const size_t esize = x.element_size();
    if (x.stride(1) != 1 || x.stride(0) != K || reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 != 0 || (K * esize) % 16 != 0) {
        x = x.contiguous();
        if (reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 != 0) x = x.clone();
    }
    const at::Tensor bc = b.defined() && reinterpret_cast<uintptr_t>(b.const_data_ptr()) % 16 != 0 ? b.clone() : b;
    const c10::cuda::CUDAGuard guard(x.device());
    cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
    const Epilogue ep{bc.defined() ? bc.const_data_ptr() : nullptr, relu, accumulate};
    const Choice& choice = choose(w, ep, handle);
    run_config(choice.for_rows(M), handle, x, w, ep, out, &choice.base);
}

void check_operands(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    if (!x.is_cuda() || !w.is_cuda() || w.dim() != 2 || x.size(-1) != w.size(1) || x.scalar_type() != w.scalar_type() ||
        !w.is_contiguous() || (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0) || b.scalar_type() != w.scalar_type()))) {
        fail(Status::kInternal, "rows_gemm: CUDA x [..., K], w [N, K] contiguous, b [N], one dtype");
    }
}

}  // namespace

std::string rows_gemm_config(const at::Tensor& w, bool bias, bool relu, bool accumulate) {
    const c10::cuda::CUDAGuard guard(w.device());
    const at::Tensor b = bias ? at::zeros({w.size(0)}, w.options()) : at::Tensor();
    const Epilogue ep{bias ? b.const_data_ptr() : nullptr, relu, accumulate};
    return choose(w, ep, at::cuda::getCurrentCUDABlasLtHandle()).description;
}

at::Tensor rows_gemm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, bool relu) {
    check_operands(x, w, b);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = w.size(0);
    at::Tensor out = at::empty(shape, x.options().memory_format(at::MemoryFormat::Contiguous));
    rows_gemm_into(x, w, b, relu, /*accumulate=*/false, out);
    return out;
}

void rows_gemm_accumulate(const at::Tensor& x, const at::Tensor& w, const at::Tensor& out) {
    check_operands(x, w, at::Tensor());
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = w.size(0);
    if (out.sizes() != at::IntArrayRef(shape) || out.scalar_type() != x.scalar_type() || out.device() != x.device() ||
        !out.is_contiguous() || reinterpret_cast<uintptr_t>(out.const_data_ptr()) % 16 != 0 || out.is_alias_of(x)) {
        fail(Status::kInternal,
             "rows_gemm_accumulate: out must be contiguous, 16-byte aligned, x's shape with the last dim N, x's dtype, and not share x's "
             "storage");
    }
    rows_gemm_into(x, w, at::Tensor(), /*relu=*/false, /*accumulate=*/true, out);
}

}  // namespace cn::kernels
