#include "core/models/zimage/zimage_scheduler.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/zeros.h>

namespace cn::zimage {

Schedule make_schedule(const SchedulerConfig& c, int64_t steps) {
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    // get_default_z_image_sigmas: torch.linspace(1.0, 1 / N, N) (fp32), passed on as Python floats and read back
    // by the scheduler as a float32 numpy array (the same values).
    const at::Tensor s = at::linspace(1.0, 1.0 / static_cast<double>(steps), steps, f32);
    // numpy float32 with Python-float scalars: shift * s / (1 + (shift - 1) * s), each op rounded to fp32.
    const at::Tensor shifted = (s * c.shift) / ((s * (c.shift - 1.0)) + 1.0);
    Schedule out;
    out.timesteps = shifted * static_cast<double>(c.num_train_timesteps);
    out.sigmas = at::cat({shifted, at::zeros({1}, f32)});
    out.t_model = (1000.0 - out.timesteps) / 1000.0;
    return out;
}

}  // namespace cn::zimage
