#include "kernels/chronos2_io.h"

#include <cfloat>
#include <cmath>
#include <limits>

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "core/common/status.h"
#include "kernels/cascade_sum.h"
#include "kernels/cpu_round.h"

namespace cn::kernels {
namespace {

float lowest_of(c10::ScalarType dt) {
    switch (dt) {
        case c10::kBFloat16: return static_cast<float>(std::numeric_limits<c10::BFloat16>::lowest());
        case c10::kHalf: return static_cast<float>(std::numeric_limits<c10::Half>::lowest());
        default: return std::numeric_limits<float>::lowest();
    }
}

// nan_to_num's +-Inf replacement.
float finite_or_max(float v) { return std::isinf(v) ? (v > 0 ? FLT_MAX : -FLT_MAX) : v; }

// The reference's InstanceNorm statistics of one row, in its summation order (kernels/cascade_sum.h).
void instance_stats(const float* x, int64_t L, float eps, float& loc_out, float& scale_out) {
    int64_t count = 0;
    for (int64_t t = 0; t < L; ++t) count += std::isnan(x[t]) ? 0 : 1;
    const float n = static_cast<float>(count);
    const float sum = aten_sum::row_sum([&](int64_t i) { return std::isnan(x[i]) ? 0.f : x[i]; }, L);
    float loc = sum / n;  // 0 / 0 = NaN when every value is missing
    loc = std::isnan(loc) ? 0.f : finite_or_max(loc);
    const float sq = aten_sum::row_sum(
        [&](int64_t i) {
            const float d = x[i] - loc;
            const float q = d * d;
            return std::isnan(q) ? 0.f : q;
        },
        L);
    float scale = std::sqrt(sq / n);
    scale = std::isnan(scale) ? 1.f : finite_or_max(scale);
    loc_out = loc;
    scale_out = scale == 0.f ? eps : scale;
}

template <class T>
void preprocess_rows(const at::Tensor& context, const at::Tensor& future, const Chronos2PrepParams& prm, Chronos2Prep& o) {
    const int64_t B = context.size(0), L = context.size(1), p = prm.patch, N = prm.output_patches;
    const int64_t P = o.context_patches, S = P + 1 + N, F = future.defined() ? future.size(1) : 0;
    const int64_t reg = prm.reg_slot ? 1 : 0;
    const float* ctx = context.const_data_ptr<float>();
    const float* fut = future.defined() ? future.const_data_ptr<float>() : nullptr;
    T* feats = o.feats.data_ptr<T>();
    T* valid = o.valid.data_ptr<T>();
    T* bias = o.time_bias.data_ptr<T>();
    float* locp = o.loc.data_ptr<float>();
    float* scalep = o.scale.data_ptr<float>();
    const float ts = static_cast<float>(prm.time_scale), minv = lowest_of(prm.dtype), eps = static_cast<float>(prm.eps);
    at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            const float* x = ctx + b * L;
            float loc, scale;
            instance_stats(x, L, eps, loc, scale);
            locp[b] = loc;
            scalep[b] = scale;
            auto norm = [&](float v) {
                float z = (v - loc) / scale;
                if (prm.arcsinh) z = std::asinh(z);
                return round_to<T>(z);
            };
            T* fb = feats + b * (P + reg + N) * 3 * p;
            const int64_t pad = P * p - L;
            std::fill_n(fb + P * 3 * p, reg * 3 * p, static_cast<T>(0.f));
            for (int64_t t = 0; t < P; ++t) {
                bool any = false;
                for (int64_t k = 0; k < p; ++k) {
                    const int64_t j = t * p + k, src = j - pad;
                    const float v = src >= 0 ? x[src] : std::numeric_limits<float>::quiet_NaN();
                    const bool seen = !std::isnan(v);
                    any = any || seen;
                    T* f = fb + t * 3 * p;
                    f[k] = static_cast<T>(static_cast<float>(j - P * p) / ts);
                    f[p + k] = static_cast<T>(seen ? norm(v) : 0.f);
                    f[2 * p + k] = static_cast<T>(seen ? 1.f : 0.f);
                }
                valid[b * S + t] = static_cast<T>(any ? 1.f : 0.f);
                bias[b * S + t] = static_cast<T>(any ? 0.f : minv);
            }
            for (int64_t t = P; t < S; ++t) {
                valid[b * S + t] = static_cast<T>(1.f);
                bias[b * S + t] = static_cast<T>(0.f);
            }
            for (int64_t t = 0; t < N; ++t) {
                for (int64_t k = 0; k < p; ++k) {
                    const int64_t j = t * p + k;
                    const float v = (fut && j < F) ? fut[b * F + j] : std::numeric_limits<float>::quiet_NaN();
                    const bool seen = !std::isnan(v);
                    T* f = fb + (P + reg + t) * 3 * p;
                    f[k] = static_cast<T>(static_cast<float>(j) / ts);
                    f[p + k] = static_cast<T>(seen ? norm(v) : 0.f);
                    f[2 * p + k] = static_cast<T>(seen ? 1.f : 0.f);
                }
            }
        }
    });
}

template <class T>
void postprocess_rows(const at::Tensor& head, const float* loc, const float* scale, int64_t Q, int64_t p, bool arcsinh, float* out) {
    const int64_t B = head.size(0), N = head.size(1);
    const T* h = head.const_data_ptr<T>();
    at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            for (int64_t n = 0; n < N; ++n) {
                for (int64_t q = 0; q < Q; ++q) {
                    for (int64_t k = 0; k < p; ++k) {
                        float v = static_cast<float>(h[((b * N + n) * Q + q) * p + k]);
                        if (arcsinh) v = std::sinh(v);
                        const float m = v * scale[b];
                        out[(b * Q + q) * N * p + n * p + k] = m + loc[b];
                    }
                }
            }
        }
    });
}

template <class F>
void dispatch(c10::ScalarType dt, const char* what, const F& f) {
    switch (dt) {
        case c10::kFloat: return f(float{});
        case c10::kBFloat16: return f(c10::BFloat16{});
        case c10::kHalf: return f(c10::Half{});
        default: fail(Status::kUnsupported, std::string(what) + ": unsupported dtype");
    }
}

Chronos2Prep allocate(const at::Tensor& context, const at::Tensor& future, const Chronos2PrepParams& p) {
    if (!context.defined() || context.dim() != 2 || context.scalar_type() != c10::kFloat || !context.is_contiguous()) {
        fail(Status::kInternal, "chronos2_preprocess: context must be contiguous fp32 [B, L]");
    }
    if (future.defined() && (future.dim() != 2 || future.size(0) != context.size(0) || future.scalar_type() != c10::kFloat ||
                             !future.is_contiguous() || future.device() != context.device())) {
        fail(Status::kInternal, "chronos2_preprocess: future must be contiguous fp32 [B, F] on the context's device");
    }
    if (p.patch <= 0 || p.output_patches < 0 || context.size(1) < 1) {
        fail(Status::kInternal, "chronos2_preprocess: bad patch size, output patches or empty context");
    }
    Chronos2Prep o;
    const int64_t B = context.size(0), P = (context.size(1) + p.patch - 1) / p.patch, N = p.output_patches;
    o.context_patches = P;
    const auto dt = context.options().dtype(p.dtype);
    o.feats = at::empty({B, P + (p.reg_slot ? 1 : 0) + N, 3 * p.patch}, dt);
    o.valid = at::empty({B, P + 1 + N}, dt);
    o.time_bias = at::empty({B, P + 1 + N}, dt);
    o.loc = at::empty({B}, context.options());
    o.scale = at::empty({B}, context.options());
    return o;
}

Chronos2Stats allocate_stats(const at::Tensor& context) {
    if (!context.defined() || context.dim() != 2 || context.scalar_type() != c10::kFloat || !context.is_contiguous() ||
        context.size(1) < 1) {
        fail(Status::kInternal, "chronos2_instance_stats: context must be contiguous fp32 [B, L], L >= 1");
    }
    return {at::empty({context.size(0)}, context.options()), at::empty({context.size(0)}, context.options())};
}

void check_post(const at::Tensor& head, const at::Tensor& loc, const at::Tensor& scale, int64_t Q, int64_t p) {
    if (!head.defined() || head.dim() != 3 || !head.is_contiguous() || head.size(2) != Q * p || !loc.defined() || !scale.defined() ||
        loc.numel() != head.size(0) || scale.numel() != head.size(0) || loc.scalar_type() != c10::kFloat ||
        scale.scalar_type() != c10::kFloat || !loc.is_contiguous() || !scale.is_contiguous() || loc.device() != head.device() ||
        scale.device() != head.device()) {
        fail(Status::kInternal, "chronos2_postprocess: head must be contiguous [B, N, Q p], loc and scale fp32 [B] on its device");
    }
}

}  // namespace

Chronos2Prep chronos2_preprocess_cpu(const at::Tensor& context, const at::Tensor& future, const Chronos2PrepParams& p) {
    Chronos2Prep o = allocate(context, future, p);
    dispatch(p.dtype, "chronos2_preprocess", [&](auto tag) { preprocess_rows<decltype(tag)>(context, future, p, o); });
    return o;
}

Chronos2Stats chronos2_instance_stats_cpu(const at::Tensor& context, double eps) {
    Chronos2Stats o = allocate_stats(context);
    const int64_t L = context.size(1);
    const float* ctx = context.const_data_ptr<float>();
    float* loc = o.loc.data_ptr<float>();
    float* scale = o.scale.data_ptr<float>();
    at::parallel_for(0, context.size(0), 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) instance_stats(ctx + b * L, L, static_cast<float>(eps), loc[b], scale[b]);
    });
    return o;
}

at::Tensor chronos2_postprocess_cpu(const at::Tensor& head, const at::Tensor& loc, const at::Tensor& scale, int64_t Q, int64_t p,
                                    bool arcsinh) {
    check_post(head, loc, scale, Q, p);
    at::Tensor out = at::empty({head.size(0), Q, head.size(1) * p}, head.options().dtype(c10::kFloat));
    dispatch(head.scalar_type(), "chronos2_postprocess", [&](auto tag) {
        postprocess_rows<decltype(tag)>(head, loc.const_data_ptr<float>(), scale.const_data_ptr<float>(), Q, p, arcsinh,
                                        out.data_ptr<float>());
    });
    return out;
}

Chronos2Prep chronos2_preprocess(const at::Tensor& context, const at::Tensor& future, const Chronos2PrepParams& p) {
#ifdef CN_WITH_CUDA
    if (context.is_cuda()) {
        Chronos2Prep o = allocate(context, future, p);
        chronos2_preprocess_cuda(context, future, p, o);
        return o;
    }
#endif
    return chronos2_preprocess_cpu(context, future, p);
}

Chronos2Stats chronos2_instance_stats(const at::Tensor& context, double eps) {
#ifdef CN_WITH_CUDA
    if (context.is_cuda()) {
        Chronos2Stats o = allocate_stats(context);
        chronos2_instance_stats_cuda(context, eps, o);
        return o;
    }
#endif
    return chronos2_instance_stats_cpu(context, eps);
}

at::Tensor chronos2_postprocess(const at::Tensor& head, const at::Tensor& loc, const at::Tensor& scale, int64_t Q, int64_t p,
                                bool arcsinh) {
#ifdef CN_WITH_CUDA
    if (head.is_cuda()) {
        check_post(head, loc, scale, Q, p);
        at::Tensor out = at::empty({head.size(0), Q, head.size(1) * p}, head.options().dtype(c10::kFloat));
        chronos2_postprocess_cuda(head, loc, scale, Q, p, arcsinh, out);
        return out;
    }
#endif
    return chronos2_postprocess_cpu(head, loc, scale, Q, p, arcsinh);
}

}  // namespace cn::kernels
