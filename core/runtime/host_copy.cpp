#include "core/runtime/host_copy.h"

#include <ATen/ops/empty.h>

#ifdef CN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace cn {

at::TensorOptions host_options(c10::Device device) {
    return at::TensorOptions().dtype(at::kFloat).device(at::kCPU).pinned_memory(device.is_cuda());
}

struct DeviceToHost::State {
    at::Tensor host;
#ifdef CN_WITH_CUDA
    at::Tensor device;  // kept until the copy is done (also recorded on the side stream for the allocator)
    at::cuda::CUDAEvent done;
#endif
};

DeviceToHost::DeviceToHost(const at::Tensor& t) : s_(std::make_unique<State>()) {
#ifdef CN_WITH_CUDA
    if (t.is_cuda()) {
        const c10::cuda::CUDAGuard guard(t.device());
        const at::cuda::CUDAStream producer = at::cuda::getCurrentCUDAStream();
        const at::cuda::CUDAStream side = at::cuda::getStreamFromPool(false, t.device().index());
        at::cuda::CUDAEvent produced;
        produced.record(producer);
        produced.block(side);
        s_->device = t;
        s_->host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
        {
            const c10::cuda::CUDAStreamGuard on_side(side);
            s_->host.copy_(t, /*non_blocking=*/true);
        }
        t.record_stream(side);
        s_->done.record(side);
        return;
    }
#endif
    s_->host = t;
}

DeviceToHost::~DeviceToHost() = default;
DeviceToHost::DeviceToHost(DeviceToHost&&) noexcept = default;
DeviceToHost& DeviceToHost::operator=(DeviceToHost&&) noexcept = default;

at::Tensor DeviceToHost::wait() {
#ifdef CN_WITH_CUDA
    if (s_->device.defined()) {
        s_->done.synchronize();
        s_->device = at::Tensor();
    }
#endif
    return s_->host;
}

}  // namespace cn
