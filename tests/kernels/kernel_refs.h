// fp64 references for cutenative's kernels, following each kernel header's stated semantics (rounding to
// the storage dtype at the stated points, everything else in double), and the tolerance helper the
// CPU and GPU kernel tests share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/asinh.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/nanmean.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sinh.h>
#include <ATen/ops/square.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "kernels/chronos2_io.h"

// GPU tests: skip cleanly on a machine without a CUDA device.
#define REQUIRE_CUDA()                                        \
    do {                                                      \
        if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device"; \
    } while (0)

namespace cn::test {

// Round a double tensor to dtype T and back (identity for double).
inline at::Tensor rnd(const at::Tensor& x, c10::ScalarType dt) { return x.to(dt).to(at::kDouble); }

// Relative tolerance per dtype: two units in the last place of bf16 / f16 (a rounding boundary crossed at
// one point can move the next rounding too), and a few fp32 ulps for fp32, whose sums run in another order.
inline double rtol(c10::ScalarType dt) {
    switch (dt) {
        case at::kBFloat16: return std::ldexp(1.0, -6);
        case at::kHalf: return std::ldexp(1.0, -9);
        default: return 4e-6;
    }
}

// Every element within atol + rtol * |ref|; NaN only where the reference has NaN. Reports the worst one.
inline void expect_close(const at::Tensor& got_in, const at::Tensor& ref_in, double rt, double at_, const std::string& what) {
    const at::Tensor got = got_in.to(at::kCPU).to(at::kDouble).contiguous().reshape({-1});
    const at::Tensor ref = ref_in.to(at::kCPU).to(at::kDouble).contiguous().reshape({-1});
    ASSERT_EQ(got.numel(), ref.numel()) << what;
    const double* g = got.const_data_ptr<double>();
    const double* r = ref.const_data_ptr<double>();
    int64_t bad = 0, worst = -1;
    double worst_ratio = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
        if (std::isnan(r[i]) || std::isnan(g[i])) {
            if (std::isnan(r[i]) != std::isnan(g[i])) ++bad, worst = i, worst_ratio = INFINITY;
            continue;
        }
        const double ratio = std::abs(g[i] - r[i]) / (at_ + rt * std::abs(r[i]));
        if (ratio > 1) ++bad;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.numel() << " elements off; worst at " << worst << ": got "
                      << (worst >= 0 ? g[worst] : 0) << " want " << (worst >= 0 ? r[worst] : 0) << " (err/tol " << worst_ratio << ")";
}

// Share of elements that are bit-equal after rounding both to `dt` (a check that differences are rare).
inline double share_equal(const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor x = a.to(at::kCPU).to(at::kDouble), y = b.to(at::kCPU).to(at::kDouble);
    return (x == y).logical_or(at::isnan(x).logical_and(at::isnan(y))).to(at::kDouble).mean().item<double>();
}

inline at::Tensor ref_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
    const c10::ScalarType dt = x.scalar_type();
    const at::Tensor x64 = x.to(at::kCPU).to(at::kDouble), w64 = w.to(at::kCPU).to(at::kDouble);
    const at::Tensor var = (x64 * x64).mean(-1, true);
    const at::Tensor y = rnd(x64 * at::rsqrt(var + eps), dt);
    return rnd(w64 * y, dt);
}

// x: [B, S, H, dk] (any dtype), inv: [dk/2] fp32. Returns the rotated values, rounded to x's dtype.
inline at::Tensor ref_rope(const at::Tensor& x, const at::Tensor& inv, int64_t pos0 = 0) {
    const c10::ScalarType dt = x.scalar_type();
    const at::Tensor x64 = x.to(at::kCPU).to(at::kDouble);
    const int64_t S = x.size(1), half = x.size(3) / 2;
    // f = inv * s computed in fp32, as the kernels do.
    const at::Tensor f = (inv.to(at::kCPU).view({1, half}) * at::arange(pos0, pos0 + S, at::kFloat).view({S, 1})).to(at::kDouble);
    const at::Tensor c = rnd(at::cos(f), dt).view({1, S, 1, half}), s = rnd(at::sin(f), dt).view({1, S, 1, half});
    const at::Tensor x1 = x64.slice(3, 0, half), x2 = x64.slice(3, half);
    const at::Tensor lo = rnd(rnd(x1 * c, dt) - rnd(x2 * s, dt), dt);
    const at::Tensor hi = rnd(rnd(x2 * c, dt) + rnd(x1 * s, dt), dt);
    return at::cat({lo, hi}, 3);
}

struct RefPrep {
    at::Tensor feats, valid, time_bias, loc, scale;  // double
};

// The reference's InstanceNorm statistics (chronos-forecasting 2.3.2 InstanceNorm.forward) in ATen's fp32 CPU ops:
// loc = nan_to_num(nanmean(x)), scale = nan_to_num(sqrt(nanmean((x - loc)^2)), 1), 0 -> eps. [B] fp32 each.
// The square root is IEEE's (std::sqrt), as cutenative takes it: ATen's CPU sqrt goes through MKL's vector math,
// which is within 1 ulp, not correctly rounded (seen on AMD EPYC: 15% of values 1 ulp off), so bits would
// depend on the processor; sqrt never changes the branch (zero or not).
inline std::pair<at::Tensor, at::Tensor> ref_instance_stats(const at::Tensor& context, double eps) {
    const at::Tensor x = context.to(at::kCPU).to(at::kFloat);
    const at::Tensor loc = at::nan_to_num(at::nanmean(x, -1, /*keepdim=*/true), 0.0);
    const at::Tensor var = (x - loc).square().nanmean(-1, /*keepdim=*/true).contiguous();
    at::Tensor root = at::empty_like(var);
    for (int64_t i = 0; i < var.numel(); ++i) root.data_ptr<float>()[i] = std::sqrt(var.const_data_ptr<float>()[i]);
    at::Tensor scale = at::nan_to_num(root, 1.0);
    scale = at::where(scale == 0, at::full({}, eps, at::kFloat), scale);
    return {loc.view({-1}), scale.view({-1})};
}

// fp64 transform of the kernel's stated semantics, with the reference's fp32 statistics.
inline RefPrep ref_preprocess(const at::Tensor& context, const at::Tensor& future, const kernels::Chronos2PrepParams& p) {
    const c10::ScalarType dt = p.dtype;
    const at::Tensor x = context.to(at::kCPU).to(at::kDouble);
    const int64_t B = x.size(0), L = x.size(1), pp = p.patch, N = p.output_patches, P = (L + pp - 1) / pp;
    const auto [loc32, scale32] = ref_instance_stats(context, p.eps);
    const at::Tensor loc = loc32.to(at::kDouble).view({B, 1}), scale = scale32.to(at::kDouble).view({B, 1});
    auto norm = [&](const at::Tensor& v) {
        at::Tensor z = (v - loc) / scale;
        if (p.arcsinh) z = at::asinh(z);
        return rnd(z, dt);
    };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const at::Tensor padded = at::cat({at::full({B, P * pp - L}, nan, at::kDouble), x}, 1);
    at::Tensor fut = at::full({B, N * pp}, nan, at::kDouble);
    if (future.defined()) {
        const int64_t F = std::min<int64_t>(future.size(1), N * pp);
        fut.slice(1, 0, F).copy_(future.to(at::kCPU).to(at::kDouble).slice(1, 0, F));
    }
    auto tokens = [&](const at::Tensor& vals, const at::Tensor& time, int64_t T) {
        const at::Tensor m = at::isnan(vals).logical_not();
        const at::Tensor z = at::where(m, norm(vals), at::zeros({}, at::kDouble));
        return at::cat({rnd(time, dt).view({1, T, pp}).expand({B, T, pp}), z.view({B, T, pp}), m.to(at::kDouble).view({B, T, pp})}, -1);
    };
    RefPrep r;
    const at::Tensor ctx_time = at::arange(-P * pp, 0, at::kDouble) / p.time_scale;
    const at::Tensor fut_time = at::arange(0, N * pp, at::kDouble) / p.time_scale;
    r.feats = at::cat({tokens(padded, ctx_time, P), tokens(fut, fut_time, N)}, 1);
    const at::Tensor pv = at::isnan(padded).logical_not().view({B, P, pp}).any(-1).to(at::kDouble);
    r.valid = at::cat({pv, at::ones({B, 1 + N}, at::kDouble)}, 1);
    double minv = -std::numeric_limits<float>::max();
    if (dt == at::kBFloat16) minv = static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
    if (dt == at::kHalf) minv = static_cast<double>(std::numeric_limits<c10::Half>::lowest());
    r.time_bias = at::where(r.valid > 0, at::zeros({}, at::kDouble), at::full({}, minv, at::kDouble));
    r.loc = loc.view({B});
    r.scale = scale.view({B});
    return r;
}

inline at::Tensor ref_postprocess(const at::Tensor& head, const at::Tensor& loc, const at::Tensor& scale, int64_t Q, int64_t p,
                                  bool arcsinh) {
    const at::Tensor h = head.to(at::kCPU).to(at::kDouble);
    const int64_t B = h.size(0), N = h.size(1);
    at::Tensor v = h.view({B, N, Q, p}).permute({0, 2, 1, 3}).reshape({B, Q, N * p});
    if (arcsinh) v = at::sinh(v);
    return v * scale.to(at::kCPU).to(at::kDouble).view({B, 1, 1}) + loc.to(at::kCPU).to(at::kDouble).view({B, 1, 1});
}

// Random context rows with missing values, an all-missing row, a constant row, large and tiny scales.
// Rows a statistic must get right: random at many magnitudes, constant at several magnitudes, near-constant,
// alternating signs, NaN holes, all missing but one, all missing, squares that overflow fp32, mixed extremes;
// at lengths around the summation order's boundaries (8, 32, 128 values, powers of two) up to 20,000.
inline std::vector<std::vector<float>> degenerate_rows() {
    std::vector<int64_t> lengths;
    for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
    for (int64_t c : {64, 128, 256, 512, 1024, 2048, 4096, 8192}) {
        for (int64_t d : {-1, 0, 1}) lengths.push_back(c + d);
    }
    lengths.push_back(1000);
    lengths.push_back(20000);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> unit(0.f, 1.f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::vector<float>> rows;
    for (int64_t n : lengths) {
        auto row = [&](auto f) {
            std::vector<float> r(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = f(i);
            rows.push_back(std::move(r));
        };
        for (float mag : {1e-6f, 1.f, 1e3f, 1e6f}) row([&](int64_t) { return 10.f * mag + mag * normal(rng); });
        for (float c : {0.f, 0.1f, 1.f, 97.3f, -7.77f, 1e-30f, 1e30f, 3e38f}) row([&](int64_t) { return c; });
        row([&](int64_t i) { return std::nextafter(1234.5678f, i % 3 == 0 ? 2e3f : 0.f); });  // near-constant
        row([&](int64_t i) { return i % 2 == 0 ? 42.5f : -42.5f; });
        row([&](int64_t) { return unit(rng) < 0.3f ? nan : normal(rng); });
        const int64_t one = static_cast<int64_t>(unit(rng) * static_cast<float>(n)) % n;
        row([&](int64_t i) { return i == one ? 42.42f : nan; });
        row([&](int64_t) { return nan; });
        row([&](int64_t) { return 1e20f * (1.f + normal(rng)); });  // (x - loc)^2 overflows
        row([&](int64_t i) { return i % 3 == 0 ? 1e30f : (i % 3 == 1 ? 1e-30f : -5.f); });
    }
    return rows;
}

// degenerate_rows() grouped by length: one [rows, n] fp32 tensor per length n.
inline std::map<int64_t, at::Tensor> degenerate_batches() {
    std::map<int64_t, std::vector<std::vector<float>>> by_length;
    for (auto& r : degenerate_rows()) by_length[static_cast<int64_t>(r.size())].push_back(std::move(r));
    std::map<int64_t, at::Tensor> out;
    for (const auto& [n, rows] : by_length) {
        at::Tensor x = at::empty({static_cast<int64_t>(rows.size()), n}, at::kFloat);
        for (size_t b = 0; b < rows.size(); ++b) std::copy(rows[b].begin(), rows[b].end(), x[static_cast<int64_t>(b)].data_ptr<float>());
        out.emplace(n, x);
    }
    return out;
}

inline at::Tensor make_context(int64_t B, int64_t L, uint64_t seed) {
    at::manual_seed(seed);
    at::Tensor x = at::randn({B, L}, at::kDouble).cumsum(1) * 3.0 + 50.0;
    x = at::where(at::rand({B, L}, at::kDouble) < 0.1, at::full({}, std::numeric_limits<double>::quiet_NaN(), at::kDouble), x);
    if (B > 1) x[1].fill_(std::numeric_limits<double>::quiet_NaN());
    if (B > 2) x[2].fill_(static_cast<double>(0.1f));  // constant: the reference's fp32 sums decide loc and scale
    if (B > 3) x[3] *= 1e6;
    if (B > 4) x[4] *= 1e-4;
    return x.to(at::kFloat).contiguous();
}

}  // namespace cn::test
