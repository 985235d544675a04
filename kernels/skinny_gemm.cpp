#include "kernels/skinny_gemm.h"

#include <ATen/ops/linear.h>

namespace cn::kernels {

bool skinny_linear_fits(const at::Tensor& x, const at::Tensor& w) {
    return x.defined() && w.defined() && x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.size(0) >= 1 &&
           x.size(0) <= 16 && x.size(1) % 8 == 0 && x.is_contiguous() && w.is_contiguous() &&
           x.scalar_type() == w.scalar_type() && x.device() == w.device() &&
           reinterpret_cast<uintptr_t>(w.const_data_ptr()) % 16 == 0 && reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 == 0;
}

at::Tensor skinny_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
#ifdef CN_WITH_CUDA
    if (x.is_cuda() && skinny_linear_fits(x, w) && (!b.defined() || (b.is_contiguous() && b.scalar_type() == w.scalar_type()))) {
        return skinny_linear_cuda(x, w, b);
    }
#endif
    return at::linear(x, w, b);
}

}  // namespace cn::kernels
