#include "kernels/kv_cache.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/scaled_dot_product_attention.h>

#include "core/common/status.h"
#include "kernels/rope.h"

namespace cn::kernels {

void check_kv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache, const at::Tensor& v_cache,
              const at::Tensor& pos, const at::Tensor& inv_freq) {
    if (!k_cache.defined() || k_cache.dim() != 4 || !k_cache.is_contiguous() || !v_cache.defined() || v_cache.sizes() != k_cache.sizes() ||
        !v_cache.is_contiguous() || v_cache.scalar_type() != k_cache.scalar_type() || v_cache.device() != k_cache.device()) {
        fail(Status::kInternal, "kv_cache: caches must be two contiguous [N, H, M, hd] tensors of one dtype and device");
    }
    for (const at::Tensor* t : {&q, &k, &v}) {
        if (!t->defined()) continue;
        if (t->dim() != 3 || t->size(0) != k_cache.size(0) || t->size(1) != k_cache.size(1) || t->size(2) != k_cache.size(3) ||
            t->stride(2) != 1 || t->scalar_type() != k_cache.scalar_type() || t->device() != k_cache.device()) {
            fail(Status::kInternal, "kv_cache: q, k, v must be [N, H, hd] views with a contiguous last dim, like the cache");
        }
    }
    if (!pos.defined() || pos.numel() != 1 || pos.scalar_type() != c10::kLong || pos.device() != k_cache.device()) {
        fail(Status::kInternal, "kv_cache: pos must be one int64 on the cache's device");
    }
    if (inv_freq.defined() && (inv_freq.dim() != 1 || inv_freq.size(0) * 2 != k_cache.size(3) || inv_freq.scalar_type() != c10::kFloat ||
                               !inv_freq.is_contiguous() || inv_freq.device() != k_cache.device())) {
        fail(Status::kInternal, "kv_cache: inv_freq must be fp32 [hd/2], contiguous, on the cache's device");
    }
}

void rope_kv_append_cpu_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache,
                         const at::Tensor& v_cache, const at::Tensor& pos, const at::Tensor& inv_freq) {
    if (!k.defined() || !v.defined() || (q.defined() && !inv_freq.defined())) {
        fail(Status::kInternal, "rope_kv_append_: k and v are required; q only with inv_freq");
    }
    check_kv(q, k, v, k_cache, v_cache, pos, inv_freq);
    at::Tensor kr = k;
    if (inv_freq.defined()) {
        // rope_ wants [B, S, H, dk]: the one token as S = 1.
        if (q.defined()) rope_cpu_(q.unsqueeze(1), inv_freq, 0, pos);
        kr = k.clone();
        rope_cpu_(kr.unsqueeze(1), inv_freq, 0, pos);
    }
    k_cache.index_copy_(2, pos, kr.unsqueeze(2));
    v_cache.index_copy_(2, pos, v.unsqueeze(2));
}

at::Tensor decode_attention_cpu(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& pos,
                                double scale) {
    if (!q.defined()) fail(Status::kInternal, "decode_attention: q is required");
    check_kv(q, {}, {}, k_cache, v_cache, pos, {});
    const int64_t N = q.size(0), H = q.size(1), M = k_cache.size(2), hd = q.size(2);
    const at::Tensor mask = (at::arange(M, pos.options()) <= pos).view({1, 1, 1, M});
    const at::Tensor a = at::scaled_dot_product_attention(q.unsqueeze(2), k_cache, v_cache, mask, 0.0, false, scale);
    return a.reshape({N, H * hd});  // [N, H, 1, hd] -> heads merged
}

void rope_kv_append_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& pos, const at::Tensor& inv_freq) {
#ifdef CN_WITH_CUDA
    if (k_cache.is_cuda()) return rope_kv_append_cuda_(q, k, v, k_cache, v_cache, pos, inv_freq);
#endif
    rope_kv_append_cpu_(q, k, v, k_cache, v_cache, pos, inv_freq);
}

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& pos,
                            double scale) {
#ifdef CN_WITH_CUDA
    if (k_cache.is_cuda()) return decode_attention_cuda(q, k_cache, v_cache, pos, scale);
#endif
    return decode_attention_cpu(q, k_cache, v_cache, pos, scale);
}

at::Tensor decode_attention_append(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_cache,
                                   const at::Tensor& v_cache, const at::Tensor& pos, const at::Tensor& inv_freq, double scale) {
#ifdef CN_WITH_CUDA
    if (k_cache.is_cuda()) return decode_attention_cuda(q, k_cache, v_cache, pos, scale, k, v, inv_freq);
#endif
    rope_kv_append_cpu_(inv_freq.defined() ? q : at::Tensor(), k, v, k_cache, v_cache, pos, inv_freq);
    return decode_attention_cpu(q, k_cache, v_cache, pos, scale);
}

}  // namespace cn::kernels
