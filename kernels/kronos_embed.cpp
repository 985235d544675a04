#include "kernels/kronos_embed.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/embedding.h>

#include "core/common/status.h"

namespace cn::kernels {

void check_token_embed(const at::Tensor& h1, const at::Tensor& h2, const at::Tensor& pos, const at::Tensor& e1, const at::Tensor& e2) {
    if (!h1.defined() || !h2.defined() || h1.dim() != 2 || h2.sizes() != h1.sizes() || h1.scalar_type() != c10::kLong ||
        h2.scalar_type() != c10::kLong || !h1.is_contiguous() || !h2.is_contiguous() || !pos.defined() || pos.numel() != 1 ||
        pos.scalar_type() != c10::kLong || !e1.defined() || !e2.defined() || e1.dim() != 2 || e2.dim() != 2 || e1.size(1) != e2.size(1) ||
        e1.scalar_type() != e2.scalar_type() || !e1.is_contiguous() || !e2.is_contiguous() || h2.device() != h1.device() ||
        pos.device() != h1.device() || e1.device() != h1.device() || e2.device() != h1.device()) {
        fail(Status::kInternal,
             "kronos_token_embed: hist1/hist2 int64 [N, L] contiguous, pos int64 [1], tables [V, d] contiguous, one device");
    }
}

void check_add_time(const at::Tensor& x, const at::Tensor& stamps, const at::Tensor& pos, const KronosTimeTables& t) {
    const bool ok = x.defined() && x.dim() == 2 && x.is_contiguous() && stamps.defined() && stamps.dim() == 3 &&
                    stamps.size(0) == x.size(0) && stamps.size(2) == 5 && stamps.scalar_type() == c10::kFloat && stamps.is_contiguous() &&
                    stamps.device() == x.device() && pos.defined() && pos.numel() == 1 && pos.scalar_type() == c10::kLong &&
                    pos.device() == x.device();
    if (!ok) fail(Status::kInternal, "kronos_add_time_: x [N, d] contiguous, stamps fp32 [N, L, 5] contiguous, pos int64 [1]");
    for (const at::Tensor* e : {&t.minute, &t.hour, &t.weekday, &t.day, &t.month}) {
        if (!e->defined() || e->dim() != 2 || e->size(1) != x.size(1) || e->scalar_type() != x.scalar_type() || !e->is_contiguous() ||
            e->device() != x.device() || e->size(0) < 1) {
            fail(Status::kInternal, "kronos_add_time_: tables must be [rows, d] contiguous, like x");
        }
    }
}

at::Tensor kronos_token_embed_cpu(const at::Tensor& hist1, const at::Tensor& hist2, const at::Tensor& pos, const at::Tensor& emb1,
                                  const at::Tensor& emb2, double scale) {
    check_token_embed(hist1, hist2, pos, emb1, emb2);
    const at::Tensor t1 = hist1.index_select(1, pos).squeeze(1), t2 = hist2.index_select(1, pos).squeeze(1);
    return at::cat({at::embedding(emb1, t1) * scale, at::embedding(emb2, t2) * scale}, -1);
}

void kronos_add_time_cpu_(const at::Tensor& x, const at::Tensor& stamps, const at::Tensor& pos, const KronosTimeTables& t) {
    check_add_time(x, stamps, pos, t);
    const at::Tensor st = stamps.index_select(1, pos).squeeze(1).to(at::kLong);  // [N, 5]
    auto col = [&](int64_t c, const at::Tensor& table) { return at::embedding(table, at::clamp(st.select(1, c), 0, table.size(0) - 1)); };
    const at::Tensor te = col(1, t.hour) + col(2, t.weekday) + col(3, t.day) + col(4, t.month) + col(0, t.minute);
    x.add_(te);
}

at::Tensor kronos_token_embed(const at::Tensor& hist1, const at::Tensor& hist2, const at::Tensor& pos, const at::Tensor& emb1,
                              const at::Tensor& emb2, double scale) {
#ifdef CN_WITH_CUDA
    if (hist1.is_cuda()) return kronos_token_embed_cuda(hist1, hist2, pos, emb1, emb2, scale);
#endif
    return kronos_token_embed_cpu(hist1, hist2, pos, emb1, emb2, scale);
}

void kronos_add_time_(const at::Tensor& x, const at::Tensor& stamps, const at::Tensor& pos, const KronosTimeTables& t) {
#ifdef CN_WITH_CUDA
    if (x.is_cuda()) return kronos_add_time_cuda_(x, stamps, pos, t);
#endif
    kronos_add_time_cpu_(x, stamps, pos, t);
}

}  // namespace cn::kernels
