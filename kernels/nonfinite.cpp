#include "kernels/nonfinite.h"

#include <cmath>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "core/common/status.h"

namespace cn::kernels {
namespace {

template <class T>
int64_t count(const T* p, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(static_cast<float>(p[i]));
    return bad;
}

}  // namespace

int64_t count_nonfinite_cpu(const at::Tensor& t) {
    if (!c10::isFloatingType(t.scalar_type())) return 0;
    const at::Tensor c = t.device().is_cpu() ? t.contiguous() : t.to(c10::kCPU).contiguous();
    switch (c.scalar_type()) {
        case c10::kFloat: return count(c.const_data_ptr<float>(), c.numel());
        case c10::kDouble: return count(c.const_data_ptr<double>(), c.numel());
        case c10::kBFloat16: return count(c.const_data_ptr<c10::BFloat16>(), c.numel());
        case c10::kHalf: return count(c.const_data_ptr<c10::Half>(), c.numel());
        default: fail(Status::kUnsupported, "count_nonfinite: unsupported dtype");
    }
}

int64_t count_nonfinite(const at::Tensor& t) {
#ifdef CN_WITH_CUDA
    if (t.is_cuda()) return count_nonfinite_cuda(t);
#endif
    return count_nonfinite_cpu(t);
}

}  // namespace cn::kernels
