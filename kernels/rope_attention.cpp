#include "kernels/rope_attention.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <ATen/ops/scaled_dot_product_attention.h>

#include "core/common/status.h"
#include "kernels/rope.h"

#ifdef CN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace cn::kernels {
// Also called by the CUDA path (rope_attention.cu).
void check_rope_attention(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t heads) {
    if (!qkv.defined() || !bias.defined() || !inv_freq.defined() || qkv.dim() != 3 || heads < 1 || qkv.size(2) % (3 * heads) != 0 ||
        (qkv.size(2) / (3 * heads)) % 2 != 0 || !qkv.is_contiguous() || bias.dim() != 2 || bias.size(0) != qkv.size(0) ||
        bias.size(1) != qkv.size(1) || !bias.is_contiguous() || bias.scalar_type() != qkv.scalar_type() || bias.device() != qkv.device() ||
        inv_freq.dim() != 1 || inv_freq.size(0) != qkv.size(2) / (3 * heads) / 2 || inv_freq.scalar_type() != at::kFloat ||
        !inv_freq.is_contiguous() || inv_freq.device() != qkv.device()) {
        fail(Status::kInternal, "rope_attention: qkv [B, S, 3 H dk] contiguous, dk even; bias [B, S] of qkv's dtype; inv_freq [dk/2] fp32");
    }
}

bool rope_attention_cuda_takes(const at::Tensor& qkv, int64_t H) {
#ifdef CN_WITH_CUDA
    if (!qkv.defined() || !qkv.is_cuda() || qkv.dim() != 3 || H < 1 || qkv.size(2) % (3 * H) != 0 || !qkv.is_contiguous()) return false;
    if (qkv.scalar_type() != at::kBFloat16 && qkv.scalar_type() != at::kHalf) return false;
    const int64_t S = qkv.size(1), dk = qkv.size(2) / (3 * H);
    // kMaxShared, or less where the device allows less per block.
    const int64_t limit =
        std::min<int64_t>(rope_attention_detail::kMaxShared,
                          static_cast<int64_t>(at::cuda::getDeviceProperties(qkv.device().index())->sharedMemPerBlockOptin));
    return (dk == 32 || dk == 64 || dk == 128) && S >= 1 && rope_attention_detail::shared_bytes(S, dk) <= limit &&
           qkv.size(0) * H <= INT32_MAX && reinterpret_cast<uintptr_t>(qkv.const_data_ptr()) % 16 == 0;
#else
    (void)qkv;
    (void)H;
    return false;
#endif
}

at::Tensor rope_attention_composite(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t H,
                                    const at::Tensor& table) {
    check_rope_attention(qkv, bias, inv_freq, H);
    const int64_t B = qkv.size(0), S = qkv.size(1), dk = qkv.size(2) / (3 * H);
    rope_(qkv.view({B, S, 3 * H, dk}).slice(2, 0, 2 * H), inv_freq, 0, {}, qkv.is_cuda() ? table : at::Tensor());
    const at::Tensor heads = qkv.view({B, S, 3, H, dk});
    const at::Tensor q = heads.select(2, 0).permute({0, 2, 1, 3});
    const at::Tensor k = heads.select(2, 1).permute({0, 2, 1, 3});
    const at::Tensor v = heads.select(2, 2).permute({0, 2, 1, 3});
    const at::Tensor a = at::scaled_dot_product_attention(q, k, v, bias.view({B, 1, 1, S}), 0.0, false, /*scale=*/1.0);
    return a.transpose(1, 2).reshape({B, S, H * dk});
}

bool rope_attention_cuda_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("CN_ROPE_ATTENTION");
        return !(v && std::string(v) == "0");
    }();
    return on;
}

at::Tensor rope_attention(const at::Tensor& qkv, const at::Tensor& bias, const at::Tensor& inv_freq, int64_t H, const at::Tensor& table) {
#ifdef CN_WITH_CUDA
    check_rope_attention(qkv, bias, inv_freq, H);
    if (rope_attention_cuda_enabled() && rope_attention_cuda_takes(qkv, H)) return rope_attention_cuda(qkv, bias, inv_freq, H, table);
#else
    (void)table;
#endif
    return rope_attention_composite(qkv, bias, inv_freq, H, table);
}

}  // namespace cn::kernels
