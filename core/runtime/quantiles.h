// Quantile arithmetic shared by forecasters, mirroring chronos-forecasting's utils.py op for op:
// linear interpolation between known levels (flat beyond the outermost ones), weighted empirical
// quantiles, and the trapezoidal probability mass of a level set.
#pragma once

#include <ATen/core/Tensor.h>

namespace cn {

// Values at `query` levels (1-D, in [0,1]) from `values` [..., K] known at `levels` (1-D of K, or the
// same shape as `values`). Below the smallest / above the largest known level the value is held flat.
at::Tensor interpolate_quantiles(const at::Tensor& query, const at::Tensor& levels, const at::Tensor& values);

// Quantiles at `query` of the distribution given by `samples` [..., K] with probability masses
// `weights` (1-D of K, > 0, normalised here).
at::Tensor weighted_quantile(const at::Tensor& query, const at::Tensor& weights, const at::Tensor& samples);

// Normalised mass (q[i+1] - q[i-1]) / 2 per level, with q[-1] = 0 and q[n] = 1.
at::Tensor quantile_prob_mass(const at::Tensor& levels);

}  // namespace cn
