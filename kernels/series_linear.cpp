#include "kernels/series_linear.h"

#include <algorithm>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>

#include "core/common/status.h"
#include "kernels/rows_gemm.h"

// MKL's per-thread thread count (exported by libtorch_cpu.so when the wheel links MKL). Weak: null without MKL.
extern "C" int MKL_Set_Num_Threads_Local(int nt) __attribute__((weak));  // mkl_service.h: mkl_set_num_threads_local

namespace cn::kernels {
namespace {

// One thread for MKL on this OS thread while in scope (0 restores the global setting, MKL's convention).
struct MklOneThread {
    int previous = 0;
    MklOneThread() {
        if (MKL_Set_Num_Threads_Local) previous = MKL_Set_Num_Threads_Local(1);
    }
    ~MklOneThread() {
        if (MKL_Set_Num_Threads_Local) MKL_Set_Num_Threads_Local(previous);
    }
    MklOneThread(const MklOneThread&) = delete;
    MklOneThread& operator=(const MklOneThread&) = delete;
};

void gemm_into(at::Tensor out, const at::Tensor& x, const at::Tensor& wt, const at::Tensor& b) {
    if (b.defined()) {
        at::addmm_out(out, b, x, wt);
    } else {
        at::mm_out(out, x, wt);
    }
}

}  // namespace

bool series_linear_thread_invariant() { return MKL_Set_Num_Threads_Local != nullptr; }

at::Tensor series_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t dim, bool relu) {
    return series_linear_blocked(x, w, b, dim, kSeriesLinearBlock, relu);
}

void series_linear_accumulate(const at::Tensor& x, const at::Tensor& w, const at::Tensor& out) {
    if (!x.defined() || !out.defined() || x.dim() != 3 || out.dim() != 3 || !w.defined() || w.dim() != 2 || x.size(0) != out.size(0) ||
        x.size(1) != out.size(1) || x.size(2) != w.size(1) || out.size(2) != w.size(0) || !out.is_contiguous()) {
        fail(Status::kInternal, "series_linear_accumulate: x [n, R, K], w [N, K], out [n, R, N] contiguous");
    }
#ifdef CN_WITH_CUDA
    if (x.is_cuda() && rows_gemm_enabled(x.scalar_type())) {
        rows_gemm_accumulate(x, w, out);  // refuses a misaligned or overlapping out rather than rounding another way
        return;
    }
#endif
    at::Tensor o = out;
    o.add_(series_linear(x, w));
}

at::Tensor series_linear_blocked(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t dim, int64_t block, bool relu) {
    if (block < 1 || !x.defined() || !w.defined() || w.dim() != 2 || x.dim() != 3 || dim < 0 || dim > 1 || x.size(-1) != w.size(1) ||
        (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0)))) {
        fail(Status::kInternal, "series_linear: x [n, R, K] or [R, n, K] (series along dim 0 or 1), w [N, K], b [N]");
    }
    std::vector<int64_t> shape = x.sizes().vec();
    const int64_t N = w.size(0), n = x.size(dim);
    shape.back() = N;
    at::Tensor out = at::empty(shape, x.options());
    const at::Tensor wt = w.t();
    if (!x.is_cpu()) {
#ifdef CN_WITH_CUDA
        // One launch over every row of every series, batch-invariant by its fixed configuration (rows_gemm.h).
        if (rows_gemm_enabled(x.scalar_type())) return rows_gemm(x, w, b, relu);
#endif
        for (int64_t i = 0; i < n; ++i) gemm_into(out.select(dim, i), x.select(dim, i), wt, b);
        return relu ? out.relu_() : out;
    }
    const int64_t blocks = (N + block - 1) / block;
    const at::ThreadLocalState state;  // InferenceMode and the rest of the caller's thread-local state
    at::parallel_for(0, n * blocks, 1, [&](int64_t begin, int64_t end) {
        const at::ThreadLocalStateGuard guard(state);
        MklOneThread one;
        for (int64_t t = begin; t < end; ++t) {
            const int64_t i = t / blocks, c0 = (t % blocks) * block;
            const int64_t c1 = std::min(N, c0 + block);
            gemm_into(out.select(dim, i).narrow(-1, c0, c1 - c0), x.select(dim, i), wt.narrow(1, c0, c1 - c0),
                      b.defined() ? b.narrow(0, c0, c1 - c0) : b);
        }
    });
    return relu ? out.relu_() : out;
}

}  // namespace cn::kernels
