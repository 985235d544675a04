#include "kernels/rows_gemm.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublasLt.h>

#include "core/common/status.h"

namespace cn::kernels {
namespace {

// The row count the configuration is chosen for (cuBLASLt's heuristic answer for a large batch); every other row
// count runs the same configuration.
constexpr int64_t kReferenceRows = 16384;

void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) fail(Status::kInternal, std::string("rows_gemm: ") + what + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)));
}

cudaDataType_t cuda_type(at::ScalarType t) {
    switch (t) {
        case at::kFloat: return CUDA_R_32F;
        case at::kBFloat16: return CUDA_R_16BF;
        case at::kHalf: return CUDA_R_16F;
        default: fail(Status::kInternal, "rows_gemm: dtype must be f32, bf16 or f16");
    }
}

// Descriptors of one GEMM in column-major terms: D [N, M] = op(A)=W^T... i.e. A = W viewed as K x N (ld K),
// transposed; B = X viewed as K x M (ld = row stride); C = D = out viewed as N x M (ld N).
struct Descs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    Descs(at::ScalarType dt, int64_t N, int64_t K, int64_t M, int64_t ldx, const void* bias) {
        const cudaDataType_t t = cuda_type(dt);
        check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
        const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "set TRANSA");
        check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "set TRANSB");
        if (bias) {
            const cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
            check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)), "set EPILOGUE");
            check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), "set BIAS_POINTER");
        }
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

using Key = std::tuple<int, int, int64_t, int64_t, bool>;  // device, dtype, N, K, bias

struct Choice {
    cublasLtMatmulAlgo_t algo{};
    std::string description;
};

std::string describe(const cublasLtMatmulAlgo_t& algo) {
    auto attr = [&](cublasLtMatmulAlgoConfigAttributes_t a) {
        int64_t v = 0;
        size_t written = 0;
        uint32_t small = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &small, sizeof(small), &written) == CUBLAS_STATUS_SUCCESS && written == 4) return int64_t{small};
        if (cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &v, sizeof(v), &written) == CUBLAS_STATUS_SUCCESS) return v;
        return int64_t{-1};
    };
    return "algo " + std::to_string(attr(CUBLASLT_ALGO_CONFIG_ID)) + ", tile " + std::to_string(attr(CUBLASLT_ALGO_CONFIG_TILE_ID)) +
           ", stages " + std::to_string(attr(CUBLASLT_ALGO_CONFIG_STAGES_ID)) + ", split-K " +
           std::to_string(attr(CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + ", reduction " +
           std::to_string(attr(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)) + ", swizzle " + std::to_string(attr(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)) +
           ", custom " + std::to_string(attr(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION)) + ", cluster " +
           std::to_string(attr(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

// The configuration for this weight: cuBLASLt's first heuristic answer at kReferenceRows rows, without workspace,
// that is also valid for 1 and 65536 rows and does not split K. Chosen once per key, then fixed.
const Choice& choose(at::ScalarType dt, int64_t N, int64_t K, bool bias, int device, cublasLtHandle_t handle, const void* bias_ptr) {
    static std::mutex mu;
    static std::map<Key, Choice> cache;
    const Key key{device, static_cast<int>(dt), N, K, bias};
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    Descs d(dt, N, K, kReferenceRows, K, bias ? bias_ptr : nullptr);
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t no_workspace = 0;
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &no_workspace, sizeof(no_workspace)), "set MAX_WORKSPACE");
    std::vector<cublasLtMatmulHeuristicResult_t> results(16);
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.c, d.c, pref, static_cast<int>(results.size()), results.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(s, "cublasLtMatmulAlgoGetHeuristic");
    for (int i = 0; i < found; ++i) {
        cublasLtMatmulAlgo_t algo = results[static_cast<size_t>(i)].algo;
        uint32_t split = 1;
        size_t written = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof(split), &written);
        if (split > 1) continue;
        bool ok = true;
        for (int64_t m : {int64_t{1}, int64_t{34}, int64_t{65536}}) {
            Descs dm(dt, N, K, m, K, bias ? bias_ptr : nullptr);
            cublasLtMatmulHeuristicResult_t r{};
            if (cublasLtMatmulAlgoCheck(handle, dm.op, dm.a, dm.b, dm.c, dm.c, &algo, &r) != CUBLAS_STATUS_SUCCESS || r.workspaceSize > 0) ok = false;
        }
        if (!ok) continue;
        return cache.emplace(key, Choice{algo, describe(algo)}).first->second;
    }
    fail(Status::kInternal, "rows_gemm: cuBLASLt offers no workspace-free, split-K-free configuration valid for every row count (N " +
                                std::to_string(N) + ", K " + std::to_string(K) + ")");
}

}  // namespace

bool rows_gemm_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("CN_ROWS_GEMM");
        return v && std::string(v) == "1";
    }();
    return on;
}

std::string rows_gemm_config(const at::Tensor& w, bool bias) {
    const c10::cuda::CUDAGuard guard(w.device());
    const at::Tensor b = bias ? at::empty({w.size(0)}, w.options()) : at::Tensor();
    return choose(w.scalar_type(), w.size(0), w.size(1), bias, w.device().index(), at::cuda::getCurrentCUDABlasLtHandle(),
                  bias ? b.const_data_ptr() : nullptr)
        .description;
}

at::Tensor rows_gemm(const at::Tensor& x_in, const at::Tensor& w, const at::Tensor& b) {
    if (!x_in.is_cuda() || !w.is_cuda() || w.dim() != 2 || x_in.size(-1) != w.size(1) || x_in.scalar_type() != w.scalar_type() ||
        !w.is_contiguous() || (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0) || b.scalar_type() != w.scalar_type()))) {
        fail(Status::kInternal, "rows_gemm: CUDA x [..., K], w [N, K] contiguous, b [N], one dtype");
    }
    const int64_t N = w.size(0), K = w.size(1);
    std::vector<int64_t> shape = x_in.sizes().vec();
    shape.back() = N;
    at::Tensor out = at::empty(shape, x_in.options().memory_format(at::MemoryFormat::Contiguous));
    const int64_t M = x_in.numel() / K;
    if (M == 0) return out;
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
    const void* bias = bc.defined() ? bc.const_data_ptr() : nullptr;
    const Choice& choice = choose(x.scalar_type(), N, K, bias != nullptr, x.device().index(), handle, bias);
    Descs d(x.scalar_type(), N, K, M, K, bias);
    const float alpha = 1.0f, beta = 0.0f;
    check(cublasLtMatmul(handle, d.op, &alpha, w.const_data_ptr(), d.a, x.const_data_ptr(), d.b, &beta, out.data_ptr(), d.c, out.data_ptr(),
                         d.c, &choice.algo, nullptr, 0, at::cuda::getCurrentCUDAStream()),
          "cublasLtMatmul");
    return out;
}

}  // namespace cn::kernels
