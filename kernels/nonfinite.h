// Counting NaN/Inf elements of a floating tensor: the check behind cn_model_params.check_tensors.
// CPU path always; CUDA path when built with CUDA kernels (CN_WITH_CUDA).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace cn::kernels {

// Number of NaN or ±Inf elements of `t` (F32, BF16 or F16, any device, any layout). Other dtypes: 0 for
// integer types; throws for unsupported floating types.
int64_t count_nonfinite(const at::Tensor& t);

// The same on CPU, used as the reference in tests.
int64_t count_nonfinite_cpu(const at::Tensor& t);

#ifdef CN_WITH_CUDA
int64_t count_nonfinite_cuda(const at::Tensor& t);
#endif

}  // namespace cn::kernels
