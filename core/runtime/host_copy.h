// Copies between the host and a device that overlap with the device's work: the host side of a pipeline that keeps
// one batch queued on the GPU while the previous batch's results come back.
//
//   at::Tensor in = at::empty(sizes, host_options(device));    // pinned when `device` is CUDA
//   ... fill `in` on the host ...
//   at::Tensor pred = model(in.to(device_options, /*non_blocking=*/true));  // queued, not waited for
//   DeviceToHost back(pred);    // its copy queued right behind it, on a side stream
//   ... queue the next batch ...
//   at::Tensor host = back.wait();   // waits for this copy only, not for the work queued after it
#pragma once

#include <memory>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/TensorOptions.h>

namespace cn {

// fp32 host tensor options for buffers that will be copied to `device`: page-locked when it is a CUDA device (so
// the copy runs without blocking the host; the caching host allocator keeps the block until the copy is done).
at::TensorOptions host_options(c10::Device device);

// A device tensor's copy to host memory, queued (CUDA) on a side stream after the work its producer stream has
// queued so far; a CPU tensor is taken as it is. Owns the device tensor until the copy completes.
class DeviceToHost {
public:
    explicit DeviceToHost(const at::Tensor& t);
    ~DeviceToHost();
    DeviceToHost(DeviceToHost&&) noexcept;
    DeviceToHost& operator=(DeviceToHost&&) noexcept;

    // Waits for the copy (not for later work on the producer's stream) and returns the host tensor.
    at::Tensor wait();

private:
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace cn
