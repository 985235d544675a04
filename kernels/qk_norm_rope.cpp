#include "kernels/qk_norm_rope.h"

#include <ATen/ops/empty.h>

#include "core/common/status.h"
#include "core/layers/norm.h"
#include "core/layers/rope.h"

namespace cn::kernels {
namespace {

void check(const at::Tensor& qkv, int64_t heads, const at::Tensor& q_w, const at::Tensor& k_w, const at::Tensor& freqs) {
    if (!qkv.defined() || qkv.dim() != 3 || !qkv.is_contiguous() || heads <= 0 || qkv.size(2) % (3 * heads) != 0) {
        fail(Status::kInternal, "qk_norm_rope: qkv must be [B, S, 3 H hd] contiguous");
    }
    const int64_t hd = qkv.size(2) / (3 * heads);
    if (hd % 2 != 0 || !freqs.defined() || freqs.dim() != 3 || freqs.size(0) != qkv.size(0) || freqs.size(1) != qkv.size(1) ||
        freqs.size(2) != hd / 2 || freqs.scalar_type() != at::kComplexFloat || !freqs.is_contiguous() || freqs.device() != qkv.device()) {
        fail(Status::kInternal, "qk_norm_rope: freqs must be [B, S, hd / 2] complex64 contiguous on qkv's device");
    }
    if (q_w.defined() != k_w.defined()) fail(Status::kInternal, "qk_norm_rope: both norm weights or neither");
    for (const at::Tensor* w : {&q_w, &k_w}) {
        if (w->defined() && (w->dim() != 1 || w->size(0) != hd || w->scalar_type() != qkv.scalar_type() || w->device() != qkv.device())) {
            fail(Status::kInternal, "qk_norm_rope: norm weights must be [hd] of qkv's dtype and device");
        }
    }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> qk_norm_rope_cpu(const at::Tensor& qkv, int64_t heads, const at::Tensor& q_w,
                                                                const at::Tensor& k_w, double eps, const at::Tensor& freqs) {
    check(qkv, heads, q_w, k_w, freqs);
    const int64_t B = qkv.size(0), S = qkv.size(1), D = qkv.size(2) / 3, hd = D / heads;
    auto one = [&](int64_t part, const at::Tensor& w) {
        at::Tensor x = qkv.narrow(2, part * D, D).view({B, S, heads, hd});
        if (w.defined()) x = layers::t5_rms_norm(x, w, eps);
        return layers::apply_complex_rope(x, freqs).transpose(1, 2).contiguous();
    };
    return {one(0, q_w), one(1, k_w), qkv.narrow(2, 2 * D, D).view({B, S, heads, hd}).transpose(1, 2).contiguous()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> qk_norm_rope(const at::Tensor& qkv, int64_t heads, const at::Tensor& q_w,
                                                            const at::Tensor& k_w, double eps, const at::Tensor& freqs) {
#ifdef CN_WITH_CUDA
    if (qkv.is_cuda()) {
        check(qkv, heads, q_w, k_w, freqs);
        const int64_t B = qkv.size(0), S = qkv.size(1), hd = qkv.size(2) / (3 * heads);
        at::Tensor q = at::empty({B, heads, S, hd}, qkv.options()), k = at::empty({B, heads, S, hd}, qkv.options()),
                   v = at::empty({B, heads, S, hd}, qkv.options());
        qk_norm_rope_cuda(qkv, heads, q_w, k_w, eps, freqs, q, k, v);
        return {q, k, v};
    }
#endif
    return qk_norm_rope_cpu(qkv, heads, q_w, k_w, eps, freqs);
}

}  // namespace cn::kernels
