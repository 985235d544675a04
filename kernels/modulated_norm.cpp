#include "kernels/modulated_norm.h"

#include <string>

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty_like.h>

#include "core/common/status.h"
#include "kernels/rms_norm.h"

namespace cn::kernels {
namespace {

void check(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& per_item, const char* what) {
    if (!x.defined() || !weight.defined() || x.dim() != 3 || !x.is_contiguous() || weight.dim() != 1 || weight.size(0) != x.size(2) ||
        weight.scalar_type() != x.scalar_type() || weight.device() != x.device()) {
        fail(Status::kInternal, std::string(what) + ": x [B, S, D] contiguous and weight [D] of its dtype and device");
    }
    if (per_item.defined() && (per_item.dim() != 2 || per_item.size(0) != x.size(0) || per_item.size(1) != x.size(2) ||
                               !per_item.is_contiguous() || per_item.scalar_type() != x.scalar_type() || per_item.device() != x.device())) {
        fail(Status::kInternal, std::string(what) + ": the per-item factor must be [B, D] contiguous, of x's dtype and device");
    }
}

}  // namespace

at::Tensor rms_norm_scale_cpu(const at::Tensor& x, const at::Tensor& weight, double eps, const at::Tensor& scale) {
    check(x, weight, scale, "rms_norm_scale");
    const at::Tensor n = rms_norm_cpu(x, weight.contiguous(), eps);
    return scale.defined() ? n * scale.unsqueeze(1) : n;
}

void add_gated_rms_norm_cpu(at::Tensor& x, const at::Tensor& y, const at::Tensor& weight, double eps, const at::Tensor& gate) {
    check(x, weight, gate, "add_gated_rms_norm");
    if (!y.defined() || y.sizes() != x.sizes() || y.scalar_type() != x.scalar_type()) {
        fail(Status::kInternal, "add_gated_rms_norm: y must be shaped and typed as x");
    }
    const at::Tensor n = rms_norm_cpu(y.contiguous(), weight.contiguous(), eps);
    x.add_(gate.defined() ? gate.unsqueeze(1) * n : n);
}

at::Tensor rms_norm_scale(const at::Tensor& x, const at::Tensor& weight, double eps, const at::Tensor& scale) {
#ifdef CN_WITH_CUDA
    if (x.is_cuda()) {
        check(x, weight, scale, "rms_norm_scale");
        at::Tensor out = at::empty_like(x);
        modulated_norm_cuda(x, weight, eps, scale, at::Tensor(), out);
        return out;
    }
#endif
    return rms_norm_scale_cpu(x, weight, eps, scale);
}

void add_gated_rms_norm(at::Tensor& x, const at::Tensor& y, const at::Tensor& weight, double eps, const at::Tensor& gate) {
#ifdef CN_WITH_CUDA
    if (x.is_cuda()) {
        check(x, weight, gate, "add_gated_rms_norm");
        if (!y.defined() || y.sizes() != x.sizes() || y.scalar_type() != x.scalar_type() || !y.is_contiguous()) {
            fail(Status::kInternal, "add_gated_rms_norm: y must be shaped and typed as x, contiguous");
        }
        modulated_norm_cuda(y, weight, eps, gate, x, x);
        return;
    }
#endif
    add_gated_rms_norm_cpu(x, y, weight, eps, gate);
}

}  // namespace cn::kernels
