#include "kernels/swiglu.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/silu.h>

#include "core/common/status.h"

namespace cn::kernels {

void check_swiglu(const at::Tensor& x) {
    if (!x.defined() || x.dim() != 2 || x.size(1) % 2 != 0 || (x.size(1) > 0 && x.stride(1) != 1)) {
        fail(Status::kInternal, "swiglu: x must be [R, 2F] with a contiguous last dim");
    }
}

at::Tensor swiglu_cpu(const at::Tensor& x) {
    check_swiglu(x);
    const int64_t F = x.size(1) / 2;
    return (at::silu(x.narrow(1, 0, F)) * x.narrow(1, F, F)).contiguous();
}

at::Tensor swiglu(const at::Tensor& x) {
#ifdef CN_WITH_CUDA
    if (x.is_cuda()) return swiglu_cuda(x);
#endif
    return swiglu_cpu(x);
}

}  // namespace cn::kernels
