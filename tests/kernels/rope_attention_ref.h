// fp64 reference of kernels/rope_attention.h for the kernel tests: RoPE (rotate_half, positions 0..S-1) on q and k,
// softmax(q kᵀ + bias) v per series and head, heads merged. Computed in double from qkv's values; with
// rotate = false, q and k are taken as already rotated (the kernel's rounded rotation, to test the rest alone).
#pragma once

#include <cmath>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

namespace cn::test {

inline at::Tensor rope_attention_ref(const at::Tensor& qkv_in, const at::Tensor& bias_in, const at::Tensor& inv_in, int64_t H,
                                     bool rotate = true) {
    const at::Tensor qkv = qkv_in.to(at::kCPU, at::kDouble).contiguous(), bias = bias_in.to(at::kCPU, at::kDouble).contiguous();
    const at::Tensor inv = inv_in.to(at::kCPU, at::kFloat).contiguous();
    const int64_t B = qkv.size(0), S = qkv.size(1), dk = qkv.size(2) / (3 * H), I = H * dk, half = dk / 2;
    at::Tensor out = at::empty({B, S, I}, qkv.options());
    const double* x = qkv.const_data_ptr<double>();
    const double* m = bias.const_data_ptr<double>();
    const float* f = inv.const_data_ptr<float>();
    double* o = out.data_ptr<double>();
    auto rot = [&](const double* v, int64_t s, std::vector<double>& r) {
        if (!rotate) {
            r.assign(v, v + dk);
            return;
        }
        for (int64_t i = 0; i < half; ++i) {
            const double a = static_cast<double>(f[i] * static_cast<float>(s));
            r[i] = v[i] * std::cos(a) - v[i + half] * std::sin(a);
            r[i + half] = v[i + half] * std::cos(a) + v[i] * std::sin(a);
        }
    };
    std::vector<double> q(dk), k(dk), sc(S);
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t h = 0; h < H; ++h) {
            for (int64_t i = 0; i < S; ++i) {
                rot(x + (b * S + i) * 3 * I + h * dk, i, q);
                double mx = -INFINITY;
                for (int64_t j = 0; j < S; ++j) {
                    rot(x + (b * S + j) * 3 * I + I + h * dk, j, k);
                    double d = 0;
                    for (int64_t t = 0; t < dk; ++t) d += q[t] * k[t];
                    sc[j] = d + m[b * S + j];
                    mx = std::max(mx, sc[j]);
                }
                double l = 0;
                for (int64_t j = 0; j < S; ++j) l += (sc[j] = std::exp(sc[j] - mx));
                for (int64_t t = 0; t < dk; ++t) {
                    double acc = 0;
                    for (int64_t j = 0; j < S; ++j) acc += sc[j] * x[(b * S + j) * 3 * I + 2 * I + h * dk + t];
                    o[(b * S + i) * I + h * dk + t] = acc / l;
                }
            }
        }
    }
    return out;
}

}  // namespace cn::test
