#include "core/layers/rope.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/polar.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>

namespace cn::layers {

at::Tensor rope_inv_freq(int64_t dim, double theta, c10::Device device) {
    const at::Tensor e = at::arange(0, dim, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / static_cast<double>(dim);
    return (1.0 / at::pow(theta, e)).to(device);
}

RopeTables rope_tables(const at::Tensor& inv_freq, int64_t pos0, int64_t len, c10::ScalarType dtype) {
    const at::Tensor t = at::arange(pos0, pos0 + len, inv_freq.options().dtype(at::kLong)).to(at::kFloat);
    const at::Tensor freqs = at::outer(t, inv_freq.to(at::kFloat));
    const at::Tensor emb = at::cat({freqs, freqs}, -1);
    return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor rotate_half(const at::Tensor& x) {
    const int64_t half = x.size(-1) / 2;
    return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

at::Tensor apply_rope(const at::Tensor& x, const RopeTables& t) { return x * t.cos + rotate_half(x) * t.sin; }

std::vector<at::Tensor> complex_rope_tables(const std::vector<int64_t>& axes_dims, const std::vector<int64_t>& axes_lens, double theta,
                                            c10::Device device) {
    std::vector<at::Tensor> out;
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    for (size_t i = 0; i < axes_dims.size(); ++i) {
        const int64_t d = axes_dims[i];
        const at::Tensor freqs = 1.0 / at::pow(theta, at::arange(0, d, 2, f64) / static_cast<double>(d));
        const at::Tensor angles = at::outer(at::arange(axes_lens[i], f64), freqs).to(at::kFloat);
        out.push_back(at::polar(at::ones_like(angles), angles).to(device));
    }
    return out;
}

at::Tensor complex_rope_gather(const std::vector<at::Tensor>& tables, const at::Tensor& ids) {
    std::vector<at::Tensor> parts;
    const at::Tensor idx = ids.to(at::kLong);
    for (size_t i = 0; i < tables.size(); ++i) parts.push_back(at::index_select(tables[i], 0, idx.select(1, static_cast<int64_t>(i))));
    return at::cat(parts, -1);
}

at::Tensor apply_complex_rope(const at::Tensor& x, const at::Tensor& freqs) {
    std::vector<int64_t> pairs(x.sizes().begin(), x.sizes().end() - 1);
    pairs.push_back(x.size(-1) / 2);
    pairs.push_back(2);
    const at::Tensor xc = at::view_as_complex(x.to(at::kFloat).reshape(pairs));
    return at::view_as_real(xc * freqs.unsqueeze(2)).flatten(3).to(x.scalar_type());
}

}  // namespace cn::layers
