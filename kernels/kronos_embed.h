// Kronos' input embedding for one decode step whose position lives on the device (graph mode).
//
// kronos_token_embed(hist1, hist2 [N, L] int64, pos int64 [1], emb1 [V1, d], emb2 [V2, d], scale) -> [N, 2d]:
//   row n = [round_T(emb1[hist1[n, p]] * scale), round_T(emb2[hist2[n, p]] * scale)] with p = pos[0]: the
//   HierarchicalEmbedding's two lookups, scaled by sqrt(d) and concatenated (the fusion projection follows).
// kronos_add_time_(x [N, d], stamps [N, L, 5] fp32, pos, minute [60, d], hour [24, d], weekday [7, d],
//   day [32, d], month [13, d]): x += (((hour[s1] + weekday[s2]) + day[s3]) + month[s4]) + minute[s0] with
//   s = stamps[n, p] truncated to integers: the TemporalEmbedding in the reference's order of summation,
//   rounded to T after every add. Indices are clamped to their table (the caller's stamps are in range), and
//   the CUDA paths clamp p into [0, L) (the CPU paths refuse it).
//
// Dtype T (F32, BF16, F16) for tables and x; CPU paths (ATen composites) always, CUDA paths when built with them.
#pragma once

#include <ATen/core/Tensor.h>

namespace cn::kernels {

struct KronosTimeTables {
    at::Tensor minute, hour, weekday, day, month;
};

at::Tensor kronos_token_embed(const at::Tensor& hist1, const at::Tensor& hist2, const at::Tensor& pos, const at::Tensor& emb1,
                              const at::Tensor& emb2, double scale);
void kronos_add_time_(const at::Tensor& x, const at::Tensor& stamps, const at::Tensor& pos, const KronosTimeTables& t);

at::Tensor kronos_token_embed_cpu(const at::Tensor& hist1, const at::Tensor& hist2, const at::Tensor& pos, const at::Tensor& emb1,
                                  const at::Tensor& emb2, double scale);
void kronos_add_time_cpu_(const at::Tensor& x, const at::Tensor& stamps, const at::Tensor& pos, const KronosTimeTables& t);
#ifdef CN_WITH_CUDA
at::Tensor kronos_token_embed_cuda(const at::Tensor& hist1, const at::Tensor& hist2, const at::Tensor& pos, const at::Tensor& emb1,
                                   const at::Tensor& emb2, double scale);
void kronos_add_time_cuda_(const at::Tensor& x, const at::Tensor& stamps, const at::Tensor& pos, const KronosTimeTables& t);
#endif

}  // namespace cn::kernels
