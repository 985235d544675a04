#include "kernels/sampling.h"

#include <limits>

#include <ATen/TensorOperators.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/div.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sort.h>

#include "core/common/status.h"

namespace cn::kernels {

void check_top_p(const at::Tensor& logits) {
    if (!logits.defined() || logits.dim() != 2 || logits.scalar_type() != c10::kFloat || !logits.is_contiguous()) {
        fail(Status::kInternal, "top_p_probs: logits must be contiguous fp32 [N, V]");
    }
}

void check_draw(const at::Tensor& probs, const at::Tensor& noise, const at::Tensor& hist, const at::Tensor& pos) {
    if (!probs.defined() || probs.dim() != 2 || probs.scalar_type() != c10::kFloat || !probs.is_contiguous() || !noise.defined() ||
        noise.sizes() != probs.sizes() || noise.scalar_type() != c10::kFloat || !noise.is_contiguous() ||
        noise.device() != probs.device()) {
        fail(Status::kInternal, "draw_token: probs and noise must be contiguous fp32 [N, V] on one device");
    }
    if (hist.defined() && (hist.dim() != 2 || hist.size(0) != probs.size(0) || hist.scalar_type() != c10::kLong || hist.stride(1) != 1 ||
                           hist.device() != probs.device() || !pos.defined() || pos.numel() != 1 || pos.scalar_type() != c10::kLong ||
                           pos.device() != probs.device())) {
        fail(Status::kInternal, "draw_token: hist must be int64 [N, L] with pos one int64, on the probs' device");
    }
}

at::Tensor top_p_probs_cpu(const at::Tensor& logits, double top_p) {
    check_top_p(logits);
    auto [sorted, idx] = at::sort(logits, -1, /*descending=*/true);
    const at::Tensor cum = at::cumsum(at::softmax(sorted, -1), -1);
    at::Tensor remove = cum > top_p;
    remove.slice(-1, 1).copy_(remove.slice(-1, 0, -1).clone());
    remove.select(-1, 0).fill_(false);
    const at::Tensor mask = remove.scatter(1, idx, remove);
    return at::softmax(logits.masked_fill(mask, -std::numeric_limits<double>::infinity()), -1);
}

at::Tensor draw_token_cpu(const at::Tensor& probs, const at::Tensor& noise, const at::Tensor& hist, const at::Tensor& pos) {
    check_draw(probs, noise, hist, pos);
    const at::Tensor tok = at::div(probs, noise).argmax(-1, /*keepdim=*/true);
    if (hist.defined()) hist.index_copy_(1, pos + 1, tok);
    return tok;
}

at::Tensor top_p_probs(const at::Tensor& logits, double top_p) {
#ifdef CN_WITH_CUDA
    if (logits.is_cuda()) return top_p_probs_cuda(logits, top_p);
#endif
    return top_p_probs_cpu(logits, top_p);
}

at::Tensor draw_token(const at::Tensor& probs, const at::Tensor& noise, const at::Tensor& hist, const at::Tensor& pos) {
#ifdef CN_WITH_CUDA
    if (probs.is_cuda()) return draw_token_cuda(probs, noise, hist, pos);
#endif
    return draw_token_cpu(probs, noise, hist, pos);
}

at::Tensor top_p_draw_composite(const at::Tensor& logits, double temperature, double top_p, const at::Tensor& noise, const at::Tensor& hist,
                                const at::Tensor& pos, const at::Tensor& probs_out) {
    check_top_p(logits);
    if (probs_out.defined() && (probs_out.sizes() != logits.sizes() || probs_out.scalar_type() != c10::kFloat)) {
        fail(Status::kInternal, "top_p_draw: probs_out must be fp32 [N, V]");
    }
    const at::Tensor probs = top_p_probs(logits / temperature, top_p);
    if (probs_out.defined()) probs_out.copy_(probs);
    return draw_token(probs, noise, hist, pos);
}

at::Tensor top_p_draw(const at::Tensor& logits, double temperature, double top_p, const at::Tensor& noise, const at::Tensor& hist,
                      const at::Tensor& pos, const at::Tensor& probs_out) {
#ifdef CN_WITH_CUDA
    if (logits.is_cuda()) return top_p_draw_cuda(logits, temperature, top_p, noise, hist, pos, probs_out);
#endif
    return top_p_draw_composite(logits, temperature, top_p, noise, hist, pos, probs_out);
}

}  // namespace cn::kernels
