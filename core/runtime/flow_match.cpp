#include "core/runtime/flow_match.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/where.h>

namespace cn {

at::Tensor cfg_combine(const at::Tensor& pos, const at::Tensor& neg, double guidance, double normalization) {
    at::Tensor pred = pos + guidance * (pos - neg);
    if (normalization > 0.0) {
        const at::Tensor ori = at::linalg_vector_norm(pos), now = at::linalg_vector_norm(pred);
        const at::Tensor max_norm = ori * normalization;
        pred = at::where(now > max_norm, pred * (max_norm / now), pred);
    }
    return pred;
}

at::Tensor euler_step(const at::Tensor& x, const at::Tensor& sigmas, int64_t i, const at::Tensor& v, bool negate) {
    return x + (sigmas[i + 1] - sigmas[i]) * (negate ? -v : v);
}

}  // namespace cn
