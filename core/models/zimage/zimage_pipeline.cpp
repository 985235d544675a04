#include "core/models/zimage/zimage_pipeline.h"

#include <optional>

#include <ATen/TensorOperators.h>
#include <ATen/ops/stack.h>

#include "core/models/zimage/zimage_dit.h"
#include "core/models/zimage/zimage_graphs.h"
#include "core/models/zimage/zimage_model.h"
#include "core/models/zimage/zimage_scheduler.h"
#include "core/runtime/flow_match.h"

namespace cn::zimage {
namespace {

// One batch shape of the loop: its refined captions and geometry, made when first needed.
struct Batch {
    ZImageDit::Captions captions;
    DitGeometry geometry;
};

// Items: each caption of `caps` `copies` times, in order. Each caption is refined once (the context refiner treats
// the items of a batch independently) and its result repeated.
Batch make_batch(const DitRunner& r, const std::vector<at::Tensor>& caps, int64_t copies, int64_t h, int64_t w) {
    Batch b;
    b.captions = r.dit.embed_captions(caps, r.fused);
    if (copies > 1) {
        b.captions.feats = b.captions.feats.repeat_interleave(copies, 0);
        std::vector<int64_t> lens;
        for (int64_t len : b.captions.lens) lens.insert(lens.end(), static_cast<size_t>(copies), len);
        b.captions.lens = lens;
    }
    b.geometry = r.dit.geometry(static_cast<int64_t>(b.captions.lens.size()), h, w, b.captions.lens);
    return b;
}

at::Tensor forward(const DitRunner& r, const at::Tensor& x, const at::Tensor& t, const Batch& b) {
    if (r.graphs) return r.graphs->forward(*r.lock, r.dit, x, t, b.captions.feats, b.geometry, r.fused);
    return r.dit.forward(x, t, b.captions.feats, b.geometry, r.fused);
}

}  // namespace

at::Tensor denoise(const DitRunner& r, const SchedulerConfig& sched_cfg, const DenoiseParams& p, at::Tensor latents,
                   const std::vector<at::Tensor>& caps, c10::ScalarType dtype, RunContext& run, ZImageTrace* trace) {
    const bool cfg = p.guidance > 0.0f;
    const int64_t n = latents.size(0), h = latents.size(2), w = latents.size(3);
    const c10::Device dev = latents.device();
    // With CFG, the batch is [n positive, n negative] (the pipeline's order); a step that cfg_truncation leaves
    // unguided runs the n positive items alone (as the pipeline does), a batch made when first needed.
    const Batch full = make_batch(r, caps, n, h, w);
    std::optional<Batch> pos_only;

    const Schedule sched = make_schedule(sched_cfg, p.steps);
    const at::Tensor sigmas = sched.sigmas.to(dev), t_model = sched.t_model.to(dev);
    const auto* t_norm = sched.t_model.const_data_ptr<float>();
    if (trace) {
        trace->sigmas = sched.sigmas;
        trace->timesteps = sched.timesteps;
        trace->latents.push_back(latents[0].to(at::kCPU));
    }
    for (int64_t i = 0; i < p.steps; ++i) {
        run.check();
        bool guided = cfg;
        if (cfg && p.cfg_truncation <= 1.0 && static_cast<double>(t_norm[i]) > p.cfg_truncation) guided = false;
        const at::Tensor x = latents.to(dtype);
        at::Tensor noise_pred;
        if (guided) {
            const at::Tensor out = forward(r, x.repeat({2, 1, 1, 1}), t_model.slice(0, i, i + 1).repeat({2 * n}), full);
            if (trace && i == 0) trace->dit_out = out.to(at::kCPU, at::kFloat);
            // Per image, as the pipeline combines them (its normalisation's norms are each image's).
            std::vector<at::Tensor> preds;
            for (int64_t j = 0; j < n; ++j) {
                preds.push_back(cfg_combine(out[j].to(at::kFloat), out[n + j].to(at::kFloat), p.guidance, p.cfg_normalization));
            }
            noise_pred = at::stack(preds, 0);
        } else {
            if (cfg && !pos_only) pos_only = make_batch(r, {caps[0]}, n, h, w);
            noise_pred = forward(r, x, t_model.slice(0, i, i + 1).repeat({n}), cfg ? *pos_only : full).to(at::kFloat);
            if (trace && i == 0) trace->dit_out = noise_pred.to(at::kCPU);
        }
        latents = euler_step(latents, sigmas, i, noise_pred, /*negate=*/true);
        if (trace) trace->latents.push_back(latents[0].to(at::kCPU));
        run.advance();
    }
    run.check();
    return latents;
}

}  // namespace cn::zimage
