#include "core/layers/rope.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/pow.h>

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

}  // namespace cn::layers
