#include "kernels/rms_norm.h"

#include <cmath>
#include <string>

#include <ATen/Parallel.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "core/common/status.h"
#include "kernels/cpu_round.h"

namespace cn::kernels {
namespace {

void check(const at::Tensor& x, const at::Tensor& weight, const char* what) {
    if (!x.defined() || !weight.defined()) fail(Status::kInternal, std::string(what) + ": undefined tensor");
    if (x.dim() < 1 || weight.dim() != 1 || x.size(-1) != weight.size(0)) {
        fail(Status::kInternal, std::string(what) + ": x [..., D] and weight [D] disagree");
    }
    if (x.scalar_type() != weight.scalar_type() || x.device() != weight.device()) {
        fail(Status::kInternal, std::string(what) + ": x and weight need the same dtype and device");
    }
    if (!x.is_contiguous() || !weight.is_contiguous()) fail(Status::kInternal, std::string(what) + ": needs contiguous tensors");
}

// One row at a time; rows in parallel (each row's arithmetic is the same whatever the split).
template <class T>
void rows_cpu(T* h, const T* delta, const T* w, T* out, int64_t rows, int64_t D, float eps) {
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            T* x = h + r * D;
            if (delta) {
                const T* d = delta + r * D;
                for (int64_t j = 0; j < D; ++j) x[j] = static_cast<T>(static_cast<float>(x[j]) + static_cast<float>(d[j]));
            }
            float ss = 0.f;
            for (int64_t j = 0; j < D; ++j) {
                const float v = static_cast<float>(x[j]);
                ss += v * v;
            }
            const float inv = 1.f / std::sqrt(ss / static_cast<float>(D) + eps);
            T* o = out + r * D;
            for (int64_t j = 0; j < D; ++j) {
                const float y = round_to<T>(static_cast<float>(x[j]) * inv);
                o[j] = static_cast<T>(static_cast<float>(w[j]) * y);
            }
        }
    });
}

template <class F>
void dispatch(c10::ScalarType dt, const F& f) {
    switch (dt) {
        case c10::kFloat: return f(float{});
        case c10::kBFloat16: return f(c10::BFloat16{});
        case c10::kHalf: return f(c10::Half{});
        default: fail(Status::kUnsupported, "rms_norm: unsupported dtype");
    }
}

at::Tensor run_cpu(at::Tensor& h, const at::Tensor& delta, const at::Tensor& weight, double eps) {
    at::Tensor out = at::empty_like(h);
    const int64_t D = h.size(-1), rows = D ? h.numel() / D : 0;
    dispatch(h.scalar_type(), [&](auto tag) {
        using T = decltype(tag);
        rows_cpu<T>(h.data_ptr<T>(), delta.defined() ? delta.const_data_ptr<T>() : nullptr, weight.const_data_ptr<T>(), out.data_ptr<T>(),
                    rows, D, static_cast<float>(eps));
    });
    return out;
}

void check_delta(const at::Tensor& h, const at::Tensor& delta) {
    if (!delta.defined() || delta.sizes() != h.sizes() || delta.scalar_type() != h.scalar_type() || delta.device() != h.device() ||
        !delta.is_contiguous()) {
        fail(Status::kInternal, "add_rms_norm: h and delta need the same shape, dtype, device and contiguity");
    }
}

}  // namespace

at::Tensor rms_norm_cpu(const at::Tensor& x, const at::Tensor& weight, double eps) {
    check(x, weight, "rms_norm");
    at::Tensor h = x;  // not written: no delta
    return run_cpu(h, at::Tensor(), weight, eps);
}

at::Tensor add_rms_norm_cpu(at::Tensor& h, const at::Tensor& delta, const at::Tensor& weight, double eps) {
    check(h, weight, "add_rms_norm");
    check_delta(h, delta);
    return run_cpu(h, delta, weight, eps);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
#ifdef CN_WITH_CUDA
    if (x.is_cuda()) {
        check(x, weight, "rms_norm");
        at::Tensor out = at::empty_like(x);
        rms_norm_cuda(x, at::Tensor(), at::Tensor(), weight, eps, out);
        return out;
    }
#endif
    return rms_norm_cpu(x, weight, eps);
}

at::Tensor add_rms_norm(at::Tensor& h, const at::Tensor& delta, const at::Tensor& weight, double eps) {
#ifdef CN_WITH_CUDA
    if (h.is_cuda()) {
        check(h, weight, "add_rms_norm");
        check_delta(h, delta);
        at::Tensor out = at::empty_like(h);
        rms_norm_cuda(h, delta, h, weight, eps, out);
        return out;
    }
#endif
    return add_rms_norm_cpu(h, delta, weight, eps);
}

}  // namespace cn::kernels
