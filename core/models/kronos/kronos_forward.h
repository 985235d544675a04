// The Kronos networks (shiyu-coder/Kronos model/module.py, model/kronos.py) in eval mode, op for op in ATen
// so that fp32 CPU results equal the reference's bit for bit: the tokenizer (encoder -> binary spherical
// quantisation into s1/s2 tokens, and the decoder back to normalised candles) and the predictor
// (decode_s1: hierarchical + temporal embeddings, causal RoPE blocks, s1 logits; decode_s2: the
// dependency layer's cross-attention on the sampled s1, s2 logits), plus the reference's sampler.
#pragma once

#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "core/models/kronos/kronos_config.h"
#include "core/models/kronos/kronos_weights.h"

namespace cn::kronos {

// How the transformer blocks of a sequence pass run. kReference: the reference's ops, op for op (eager mode,
// every device). kKernels (CUDA models, whose fused QKV / w1|w3 weights exist; fused and graph modes): RMS norms
// fused with the residual adds (kernels/rms_norm.h), one QKV and one w1|w3 GEMM, RoPE in place on q and k in one
// launch (kernels/rope.h), SwiGLU (kernels/swiglu.h): ~10 launches per block instead of ~45, equal to the
// reference up to the order of fp32 sums (bf16: the kernels' rounding points).
enum class Path {
    kReference,
    kKernels
};

// x [N, T, 6] normalised candles -> (s1, s2) token ids [N, T] int64.
std::pair<at::Tensor, at::Tensor> tokenizer_encode(const TokenizerConfig& cfg, const TokenizerWeights& w, const at::Tensor& x,
                                                   Path path = Path::kReference);
// (s1, s2) [N, L] -> normalised candles [N, L, 6].
at::Tensor tokenizer_decode(const TokenizerConfig& cfg, const TokenizerWeights& w, const at::Tensor& s1, const at::Tensor& s2,
                            Path path = Path::kReference);

// s1, s2 [N, L] int64, stamp [N, L, 5] (minute, hour, weekday, day, month) -> (s1 logits [N, L, V], context [N, L, d]).
std::pair<at::Tensor, at::Tensor> decode_s1(const PredictorConfig& cfg, const PredictorWeights& w, const at::Tensor& s1,
                                            const at::Tensor& s2, const at::Tensor& stamp, Path path = Path::kReference);
// context [N, L, d], sampled s1 [N, 1] -> s2 logits [N, L, V].
at::Tensor decode_s2(const PredictorConfig& cfg, const PredictorWeights& w, const at::Tensor& context, const at::Tensor& s1);

// KV cache of the predictor for one batch of rows: per layer K (after RoPE) and V [N, H, capacity, hd], and the
// dependency layer's K and V [N, 4, capacity, hd] (its keys are not rotated: its RoPE table has the query's
// length 1). Valid while the window does not slide (positions stay fixed); `len` tokens are cached.
struct KronosCache {
    std::vector<at::Tensor> k, v;
    at::Tensor dep_k, dep_v;
    int64_t len = 0;
};

// Cached decode_s1 for the rows' next `Lnew` tokens at positions cache.len.. (Lnew = the whole window on the
// first call, 1 afterwards): appends to the cache and returns (s1 logits of the last token [N, V], its final
// hidden state [N, 1, d]). Equal to decode_s1's last row up to rounding (GEMM shapes differ).
std::pair<at::Tensor, at::Tensor> decode_s1_cached(const PredictorConfig& cfg, const PredictorWeights& w, const at::Tensor& s1,
                                                   const at::Tensor& s2, const at::Tensor& stamp, KronosCache& cache, int64_t capacity,
                                                   Path path = Path::kReference);
// Cached decode_s2 for the last token: s2 logits [N, V].
at::Tensor decode_s2_cached(const PredictorConfig& cfg, const PredictorWeights& w, const at::Tensor& context_last, const at::Tensor& s1,
                            const KronosCache& cache);

// The state of graph-capturable decoding for one batch shape: the cache (capacity M rows), the token history
// [N, M + 1] (position p holds the token at p), the stamps per position [N, M, 5] and the position of the next
// step's input token (an int64 [1] on the device).
struct KronosStepState {
    KronosCache cache;
    at::Tensor hist1, hist2, stamps, pos;
};

// One cached decode step that reads and writes only `st` (nothing the host needs to know): embeds the token at
// pos, attends over the cache rows <= pos (static shapes), samples s1 and s2 with `gen` and writes them at
// pos + 1, then advances pos. Suitable for CUDA-graph capture. Runs on cutenative's kernels, five launches per
// block: the QKV GEMM with the RMS norm in front (kernels/skinny_gemm.h), RoPE + cache append + attention
// (kernels/kv_cache.h), the output GEMM with the residual add behind, the w1|w3 GEMM with the norm in front and
// SwiGLU behind, the w2 GEMM with the residual behind; then the heads, and top-p filter + draw in one launch
// (kernels/sampling.h). Equal to the cached step up to the order of fp32 sums; the draws use the same generator
// calls (one exponential_ per sampled token).
void decode_step_static(const PredictorConfig& cfg, const PredictorWeights& w, KronosStepState& st, double temperature, int64_t top_k,
                        double top_p, at::Generator& gen);

// The reference's sample_from_logits: logits [N, V] / temperature, then top-k (k > 0; top-p is then NOT
// applied, as in the reference) or top-p (< 1), softmax, one multinomial draw per row with `gen`. [N, 1] int64.
at::Tensor sample_from_logits(const at::Tensor& logits, double temperature, int64_t top_k, double top_p, at::Generator& gen);
// The same draw on cutenative's kernels (top-p filter and draw in one launch on CUDA; the same generator call,
// one exponential_ of [N, V] fp32): equal to sample_from_logits up to the order of the filter's fp32 sums.
at::Tensor sample_kernels(const at::Tensor& logits, double temperature, int64_t top_k, double top_p, at::Generator& gen);

}  // namespace cn::kronos
