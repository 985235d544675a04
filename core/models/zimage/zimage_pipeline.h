// The denoising loop of ZImagePipeline: FlowMatch Euler over the DiT (zimage_scheduler.h), with classifier-free
// guidance (cfg_truncation, cfg_normalization) from the shared runtime steps (core/runtime/flow_match.h). Work
// that does not depend on the step is done once per call: the captions' embedding and context refiner, the
// geometry (position ids, RoPE factors, masks) of each batch shape. The loop never synchronises with the host;
// each DiT forward runs eagerly or, with `graphs`, as a replay (zimage_graphs.h).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/models/zimage/zimage_config.h"
#include "core/runtime/graph_cache.h"
#include "core/runtime/run_context.h"

namespace cn::zimage {

class ZImageDit;
class ZImageGraphs;
struct ZImageTrace;

struct DenoiseParams {
    int32_t steps = 8;
    float guidance = 0.0f;           // > 0: CFG with the negative caption
    double cfg_truncation = 1.0;     // a step whose normalised time exceeds it runs unguided (when <= 1)
    double cfg_normalization = 0.0;  // > 0: guided predictions' norm capped at this times the positive's
};

// How the DiT runs: `fused` picks its fused path; `graphs` (with the lock held for the call) replays it.
struct DitRunner {
    const ZImageDit& dit;
    bool fused = false;
    ZImageGraphs* graphs = nullptr;
    const GraphPool::Lock* lock = nullptr;
};

// latents: the initial noise [n, C, h, w] fp32 on the device (n images); caps: the positive caption's embeddings,
// then the negative's when guidance > 0 ([L, cap_dim] each, the weights' dtype, on the device), shared by the n
// images. The DiT batch is diffusers' (num_images_per_prompt): n positive items, then n negative ones; each
// caption is refined once and its result repeated. Returns the final latents [n, C, h, w] fp32. Checks `run`
// before every step and advances it after each; fills `trace` (image 0) when given.
at::Tensor denoise(const DitRunner& r, const SchedulerConfig& sched, const DenoiseParams& p, at::Tensor latents,
                   const std::vector<at::Tensor>& caps, c10::ScalarType dtype, RunContext& run, ZImageTrace* trace);

}  // namespace cn::zimage
