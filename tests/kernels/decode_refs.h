// fp64 references and inputs for the decode-step kernels (kernels/swiglu.h, kv_cache.h, sampling.h,
// kronos_embed.h), shared by their CPU tests (test_decode_kernels.cpp) and CUDA tests (..._gpu.cpp).
#pragma once

#include <cmath>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>

#include "tests/kernels/kernel_refs.h"

namespace cn::test {

// silu(a) * b with the header's two roundings, in double.
inline at::Tensor ref_swiglu(const at::Tensor& x, c10::ScalarType dt) {
    const at::Tensor xd = x.to(at::kDouble);
    const int64_t F = x.size(1) / 2;
    const at::Tensor a = xd.narrow(1, 0, F), b = xd.narrow(1, F, F);
    return rnd(rnd(a / (1 + at::exp(-a)), dt) * b, dt);
}

// One query per (row, head) over cache rows 0..p, in double. q [N, H, hd], caches [N, H, M, hd] -> [N, H * hd].
inline at::Tensor ref_decode_attention(const at::Tensor& q, const at::Tensor& kc, const at::Tensor& vc, int64_t p, double scale) {
    const int64_t N = q.size(0), H = q.size(1), hd = q.size(2);
    const at::Tensor k = kc.narrow(2, 0, p + 1).to(at::kDouble), v = vc.narrow(2, 0, p + 1).to(at::kDouble);
    const at::Tensor s = at::matmul(q.to(at::kDouble).unsqueeze(2), k.transpose(2, 3)) * scale;  // [N, H, 1, p+1]
    return at::matmul(at::softmax(s, -1), v).reshape({N, H * hd});
}

// The reference's top-p filter + softmax in double on fp32 logits [N, V]; also the number of kept entries.
inline at::Tensor ref_top_p(const at::Tensor& logits, double top_p, std::vector<int64_t>* kept = nullptr) {
    const at::Tensor l = logits.to(at::kDouble).contiguous();
    const int64_t N = l.size(0), V = l.size(1);
    at::Tensor out = at::zeros({N, V}, l.options());
    for (int64_t n = 0; n < N; ++n) {
        std::vector<std::pair<double, int64_t>> row;
        for (int64_t i = 0; i < V; ++i) row.push_back({l[n][i].item<double>(), i});
        std::stable_sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        const double m = row[0].first;
        double S = 0;
        for (const auto& e : row) S += std::exp(e.first - m);
        double cum = 0, S2 = 0;
        int64_t K = 0;
        for (int64_t j = 0; j < V; ++j) {
            if (j > 0 && cum > static_cast<double>(static_cast<float>(top_p))) break;
            S2 += std::exp(row[j].first - m);
            cum += std::exp(row[j].first - m) / S;
            ++K;
        }
        for (int64_t j = 0; j < K; ++j) out[n][row[j].second] = std::exp(row[j].first - m) / S2;
        if (kept) kept->push_back(K);
    }
    return out;
}

}  // namespace cn::test
