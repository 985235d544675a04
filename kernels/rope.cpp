#include "kernels/rope.h"

#include <cmath>

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "core/common/status.h"
#include "kernels/cpu_round.h"

namespace cn::kernels {
namespace {

template <class T>
void run(const at::Tensor& x, const float* inv, int64_t pos0) {
    const int64_t B = x.size(0), S = x.size(1), H = x.size(2), half = x.size(3) / 2;
    const int64_t sb = x.stride(0), ss = x.stride(1), sh = x.stride(2);
    T* base = x.data_ptr<T>();
    at::parallel_for(0, B * S, 1, [&](int64_t begin, int64_t end) {
        for (int64_t bs = begin; bs < end; ++bs) {
            const int64_t b = bs / S, s = bs % S;
            for (int64_t i = 0; i < half; ++i) {
                const float f = inv[i] * static_cast<float>(s + pos0);
                const float c = round_to<T>(std::cos(f)), n = round_to<T>(std::sin(f));
                for (int64_t h = 0; h < H; ++h) {
                    T* p = base + b * sb + s * ss + h * sh;
                    const float x1 = static_cast<float>(p[i]), x2 = static_cast<float>(p[i + half]);
                    p[i] = static_cast<T>(round_to<T>(x1 * c) - round_to<T>(x2 * n));
                    p[i + half] = static_cast<T>(round_to<T>(x2 * c) + round_to<T>(x1 * n));
                }
            }
        }
    });
}

}  // namespace

void check_rope(const at::Tensor& x, const at::Tensor& inv_freq, const at::Tensor& pos_offset) {
    if (pos_offset.defined() && (pos_offset.numel() != 1 || pos_offset.scalar_type() != c10::kLong || pos_offset.device() != x.device())) {
        fail(Status::kInternal, "rope: pos_offset must be one int64 on x's device");
    }
    if (!x.defined() || !inv_freq.defined() || x.dim() != 4 || x.size(3) % 2 != 0 || x.stride(3) != 1) {
        fail(Status::kInternal, "rope: x must be [B, S, H, dk] with an even, contiguous last dim");
    }
    if (inv_freq.dim() != 1 || inv_freq.size(0) != x.size(3) / 2 || inv_freq.scalar_type() != c10::kFloat || !inv_freq.is_contiguous() ||
        inv_freq.device() != x.device()) {
        fail(Status::kInternal, "rope: inv_freq must be fp32 [dk/2], contiguous, on x's device");
    }
}

void rope_cpu_(const at::Tensor& x, const at::Tensor& inv_freq, int64_t pos0, const at::Tensor& pos_offset) {
    check_rope(x, inv_freq, pos_offset);
    const float* inv = inv_freq.const_data_ptr<float>();
    if (pos_offset.defined()) pos0 += *pos_offset.const_data_ptr<int64_t>();
    switch (x.scalar_type()) {
        case c10::kFloat: return run<float>(x, inv, pos0);
        case c10::kBFloat16: return run<c10::BFloat16>(x, inv, pos0);
        case c10::kHalf: return run<c10::Half>(x, inv, pos0);
        default: fail(Status::kUnsupported, "rope: unsupported dtype");
    }
}

void rope_(const at::Tensor& x, const at::Tensor& inv_freq, int64_t pos0, const at::Tensor& pos_offset, const at::Tensor& table) {
#ifdef CN_WITH_CUDA
    if (x.is_cuda()) return rope_cuda_(x, inv_freq, pos0, pos_offset, table);
#else
    (void)table;
#endif
    rope_cpu_(x, inv_freq, pos0, pos_offset);
}

at::Tensor rope_table(const at::Tensor& inv_freq, int64_t S, at::ScalarType dtype) {
#ifdef CN_WITH_CUDA
    if (inv_freq.is_cuda()) return rope_table_cuda(inv_freq, S, dtype);
#else
    (void)inv_freq, (void)S, (void)dtype;
#endif
    return {};
}

}  // namespace cn::kernels
