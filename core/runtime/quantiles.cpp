#include "core/runtime/quantiles.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <vector>

namespace cn {

at::Tensor interpolate_quantiles(const at::Tensor& query_in, const at::Tensor& levels_in, const at::Tensor& values_in) {
    const auto orig_dtype = values_in.scalar_type();
    const auto device = values_in.device();
    const at::Tensor query = query_in.to(device);
    at::Tensor levels = at::clamp(levels_in, 0.0, 1.0).to(device);
    at::Tensor values = values_in.to(at::kFloat);
    const auto f32 = values.options();

    const auto orig_shape = values.sizes().vec();
    const int64_t K = levels.size(-1);
    values = values.reshape({-1, K});
    const int64_t B = values.size(0);
    if (levels.dim() == 1)
        levels = levels.expand({B, -1});
    else
        levels = levels.reshape({-1, K});

    auto [sorted_levels, idx] = at::sort(levels, -1);
    at::Tensor sorted_values = at::gather(values, -1, idx);

    std::vector<at::Tensor> lv, vv;
    if (levels.min().item<double>() > 0.0) {
        lv.push_back(at::zeros({B, 1}, f32));
        vv.push_back(sorted_values.slice(1, 0, 1));
    }
    lv.push_back(sorted_levels);
    vv.push_back(sorted_values);
    if (levels.max().item<double>() < 1.0) {
        lv.push_back(at::ones({B, 1}, f32));
        vv.push_back(sorted_values.slice(1, -1));
    }
    sorted_levels = at::cat(lv, -1).contiguous();
    sorted_values = at::cat(vv, -1);

    const at::Tensor q = query.view({1, -1}).expand({B, query.size(0)}).contiguous();
    at::Tensor upper = at::searchsorted(sorted_levels, q, /*out_int32=*/false, /*right=*/true);
    upper = at::clamp(upper, c10::nullopt, sorted_levels.size(-1) - 1);
    const at::Tensor lower = upper - 1;
    const at::Tensor ll = at::gather(sorted_levels, 1, lower);
    const at::Tensor ul = at::gather(sorted_levels, 1, upper);
    const at::Tensor lvv = at::gather(sorted_values, 1, lower);
    const at::Tensor uvv = at::gather(sorted_values, 1, upper);
    const at::Tensor weight = at::nan_to_num((q - ll) / (ul - ll), 0.0);
    const at::Tensor out = lvv + weight * (uvv - lvv);

    auto final_shape = orig_shape;
    final_shape.back() = query.size(0);
    return out.reshape(final_shape).to(orig_dtype);
}

at::Tensor weighted_quantile(const at::Tensor& query, const at::Tensor& weights_in, const at::Tensor& samples_in) {
    const auto orig_dtype = samples_in.scalar_type();
    const auto device = samples_in.device();
    at::Tensor samples = samples_in.to(at::kFloat);
    at::Tensor weights = weights_in.to(device);
    const auto orig_shape = samples.sizes().vec();
    const int64_t K = weights.size(0);
    samples = samples.reshape({-1, K});
    const int64_t B = samples.size(0);
    weights = (weights / weights.sum(-1, /*keepdim=*/true)).expand({B, -1}).contiguous();
    auto [sorted_samples, idx] = at::sort(samples, -1);
    const at::Tensor sorted_weights = at::gather(weights, -1, idx);
    const at::Tensor cumul = at::clamp(at::cumsum(sorted_weights, -1), 0.0, 1.0);
    const at::Tensor out = interpolate_quantiles(query, cumul, sorted_samples);
    auto final_shape = orig_shape;
    final_shape.back() = query.size(0);
    return out.reshape(final_shape).to(orig_dtype);
}

at::Tensor quantile_prob_mass(const at::Tensor& levels) {
    const auto opts = levels.options();
    const at::Tensor b = at::cat({at::zeros({1}, opts), levels, at::ones({1}, opts)});
    const at::Tensor mass = (b.slice(0, 2) - b.slice(0, 0, -2)) / 2;
    return mass / mass.sum();
}

}  // namespace cn
