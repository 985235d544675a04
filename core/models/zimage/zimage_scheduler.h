// FlowMatchEulerDiscreteScheduler as ZImagePipeline drives it (static shift, no dynamic shifting): sigmas
// torch.linspace(1, 1/N, N) in fp32, shifted in fp32 as numpy computes shift*s / (1 + (shift-1)*s), a final 0
// appended; timesteps = sigmas * num_train_timesteps; the DiT is fed t = (1000 - timestep) / 1000; each step is
// x + (sigma[i+1] - sigma[i]) * v. Tables live on the CPU (fp32), as 0-dim tensors are moved where needed.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "core/models/zimage/zimage_config.h"

namespace cn::zimage {

struct Schedule {
    at::Tensor sigmas;     // [N + 1] fp32, CPU
    at::Tensor timesteps;  // [N] fp32, CPU
    at::Tensor t_model;    // [N] fp32, CPU: (1000 - timesteps) / 1000, what the DiT gets
};

Schedule make_schedule(const SchedulerConfig& c, int64_t steps);

}  // namespace cn::zimage
