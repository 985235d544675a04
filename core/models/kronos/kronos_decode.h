// Kronos decoding: from a batch's normalised candles to its sampled tokens and decoded candles. The model's mode
// becomes DecodeOptions once, when it is set; a forecast call is a DecodeCall (its generator, and in graph mode the
// lock and choice of captured graphs); each batch of the call gets one DecodePlan, run by that plan's executor.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "capi/include/cutenative.h"
#include "core/models/kronos/kronos_config.h"
#include "core/models/kronos/kronos_forward.h"
#include "core/models/kronos/kronos_graphs.h"
#include "core/models/kronos/kronos_weights.h"
#include "core/runtime/run_context.h"

namespace cn::kronos {

// What a mode means for decoding, fixed while calls run (KronosModel::apply_mode sets it with no call in flight).
//   eager: the reference's algorithm (every step recomputes the window): bit-identical on CPU.
//   fused: KV-cached decoding while the window has not slid, last-row heads; equal up to rounding. On CUDA the
//          sequence passes and draws run on cutenative's kernels (Path::kKernels).
//   graph (CUDA): fused mode's decoding replayed from CUDA graphs (kronos_graphs.h); equal up to rounding.
struct DecodeOptions {
    Path path = Path::kReference;    // sequence passes and draws: the reference's ops, or the kernels
    bool use_cache = false;          // KV-cached steps while the window has not slid (fused, graph)
    KronosGraphs* graphs = nullptr;  // graph mode: the model's captured graphs
};
// The options of `mode`; the kernels path needs the fused weights (CUDA models).
DecodeOptions decode_options(cn_mode mode, const PredictorWeights& pw, KronosGraphs* graphs);

struct Sampling {
    double temperature = 1;
    int64_t top_k = 0;
    double top_p = 1;
};

// The networks a decode reads.
struct KronosNets {
    const KronosConfig& cfg;
    const TokenizerWeights& tok;
    const PredictorWeights& pred;
};

// How one batch decodes, decided once per batch from the options, its shape and the call's graph choice:
//   kRecompute  every step recomputes the window (eager mode)
//   kCached     KV-cached steps while the window has not slid, the full recompute after (fused mode; graph mode
//               when no captured graph applies)
//   kSliding    cached steps, then the captured full-window step once the window slides (graph mode)
//   kGraphStep  the first step cached on a step entry's static cache, the rest replays of its step graph
//   kGraphEnds  the whole batch as replays: prologue, steps, epilogue (or one whole-call graph)
struct DecodePlan {
    enum class Kind {
        kRecompute,
        kCached,
        kSliding,
        kGraphStep,
        kGraphEnds
    };
    Kind kind = Kind::kRecompute;
    KronosGraphs::Step* step = nullptr;        // kGraphStep, kGraphEnds
    KronosGraphs::Ends* ends = nullptr;        // kGraphEnds
    KronosGraphs::Sliding* sliding = nullptr;  // kSliding
};

// One batch's decode: its tokens [N, T0 + P] (history, then the sampled forecast) and the decoded candles of
// the last window [N, Lw, 6] on the device.
struct DecodedBatch {
    at::Tensor all1, all2, z;
};

// The decoding of one forecast call, batch after batch. Graph mode: holds the graphs' lock for its lifetime
// (calls are serialised), captures every entry its batches need before seeding the graphs' generator (captures
// never consume draws of the seeded sequence; a call needing more entries of a kind than are kept at once runs
// without them), then plans each batch. Other modes: a fresh generator seeded with `seed`.
class DecodeCall {
public:
    struct BatchShape {
        int64_t history = 0;  // T0
        int64_t rows = 0;     // tasks x sample_count
    };
    DecodeCall(const KronosNets& nets, const DecodeOptions& opt, const Sampling& sampling, const std::vector<BatchShape>& batches,
               int64_t horizon, uint64_t seed, c10::Device device);

    // x [N, T0, 6] normalised candles (model dtype), stamp [N, T0 + P, 5] calendar features (fp32).
    DecodedBatch run(const at::Tensor& x, const at::Tensor& stamp, RunContext& run);

private:
    DecodePlan plan(int64_t history, int64_t rows);

    KronosNets nets_;
    const DecodeOptions& opt_;
    Sampling sampling_;
    int64_t horizon_;
    std::optional<KronosGraphs::Lock> lock_;                           // graph mode
    bool use_steps_ = false, use_ends_ = false, use_sliding_ = false;  // graph mode: the entries this call captured
    at::Generator gen_;
};

}  // namespace cn::kronos
