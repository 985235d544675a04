// Flow-matching diffusion steps shared by the image models' pipelines: classifier-free guidance as diffusers'
// pipelines combine it, and the FlowMatch Euler step. Device work only (no host synchronisation: a step's
// outputs never travel to the host), so a denoising loop around them keeps the device busy and graphs can
// capture it.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace cn {

// pred = pos + guidance * (pos - neg) in pos's dtype; with normalization > 0, pred is scaled by
// ||pos|| * normalization / ||pred|| where ||pred|| exceeds ||pos|| * normalization (2-norms over the whole
// tensor, as ZImagePipeline's cfg_normalization; chosen on the device, not with a host-side branch).
at::Tensor cfg_combine(const at::Tensor& pos, const at::Tensor& neg, double guidance, double normalization);

// FlowMatchEulerDiscreteScheduler.step: x + (sigmas[i + 1] - sigmas[i]) * v, with v the velocity the model
// predicts (`negate`: the model predicts -v, as Z-Image's DiT does; the negation is exact). sigmas: [N + 1] on
// x's device.
at::Tensor euler_step(const at::Tensor& x, const at::Tensor& sigmas, int64_t i, const at::Tensor& v, bool negate);

}  // namespace cn
