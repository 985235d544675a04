#include "kernels/skinny_gemm.h"

#include <cstdint>

#include <ATen/TensorOperators.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/linear.h>

#include "core/common/status.h"
#include "kernels/rms_norm.h"
#include "kernels/swiglu.h"

namespace cn::kernels {

namespace {

// x [R, K] and w [N, K] as the CUDA path reads them (K a multiple of 8, contiguous, 16-byte aligned, one dtype and
// device), with 1 <= R <= max_rows.
bool operands_fit(const at::Tensor& x, const at::Tensor& w, int64_t max_rows) {
    return x.defined() && w.defined() && x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.size(0) >= 1 &&
           x.size(0) <= max_rows && x.size(1) % 8 == 0 && x.is_contiguous() && w.is_contiguous() && x.scalar_type() == w.scalar_type() &&
           x.device() == w.device() && reinterpret_cast<uintptr_t>(w.const_data_ptr()) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 == 0;
}

}  // namespace

bool skinny_linear_fits(const at::Tensor& x, const at::Tensor& w) { return operands_fit(x, w, 16); }

bool skinny_table_fits(const at::Tensor& table, const at::Tensor& w, const at::Tensor& rows) {
    return rows.defined() && rows.dim() == 1 && rows.numel() >= 1 && rows.numel() <= 16 && rows.scalar_type() == c10::kLong &&
           rows.is_contiguous() && operands_fit(table, w, INT64_MAX) && rows.device() == table.device();
}

namespace {

void check_options(const at::Tensor& x, const at::Tensor& w, const SkinnyOptions& o) {
    if (o.norm_weight.defined() && (o.norm_weight.dim() != 1 || o.norm_weight.size(0) != x.size(-1))) {
        fail(Status::kInternal, "skinny_linear: norm weight must be [K]");
    }
    if (o.swiglu && (w.size(0) % 2 != 0 || o.residual.defined()))
        fail(Status::kInternal, "skinny_linear: swiglu needs 2F rows, no residual");
    if (o.residual.defined() && (o.residual.dim() != 2 || o.residual.size(0) != x.size(0) || o.residual.size(1) != w.size(0))) {
        fail(Status::kInternal, "skinny_linear: residual must be [M, N]");
    }
}

}  // namespace

at::Tensor skinny_linear_composite(const at::Tensor& x_in, const at::Tensor& w, const at::Tensor& b, const SkinnyOptions& o) {
    if (o.rows.defined() && (o.rows.dim() != 1 || o.rows.scalar_type() != c10::kLong))
        fail(Status::kInternal, "skinny_linear: rows must be int64 [M]");
    const at::Tensor x = o.rows.defined() ? at::embedding(x_in, o.rows) : x_in;
    check_options(x, w, o);
    at::Tensor in = x;
    if (o.norm_weight.defined()) in = rms_norm(x.contiguous(), o.norm_weight, o.norm_eps);
    at::Tensor y = at::linear(in, w, b);
    if (o.swiglu) y = swiglu(y);
    if (o.residual.defined()) y = o.residual + y;
    return y;
}

at::Tensor skinny_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const SkinnyOptions& o) {
#ifdef CN_WITH_CUDA
    auto same = [&](const at::Tensor& t) {
        return !t.defined() || (t.is_contiguous() && t.scalar_type() == w.scalar_type() && t.device() == w.device());
    };
    const bool norm_aligned = !o.norm_weight.defined() || reinterpret_cast<uintptr_t>(o.norm_weight.const_data_ptr()) % 16 == 0;
    const bool fits = o.rows.defined() ? skinny_table_fits(x, w, o.rows) : skinny_linear_fits(x, w);
    if (x.is_cuda() && fits && same(b) && same(o.norm_weight) && norm_aligned && same(o.residual) &&
        !(o.swiglu && (o.residual.defined() || w.size(0) % 2 != 0))) {
        return skinny_linear_cuda(x, w, b, o);
    }
#endif
    return skinny_linear_composite(x, w, b, o);
}

}  // namespace cn::kernels
