#include "core/runtime/stream_lanes.h"

#ifdef CN_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace cn {

StreamLanes::StreamLanes(c10::Device device, int n) {
#ifdef CN_WITH_CUDA
    if (!device.is_cuda()) return;
    const c10::cuda::CUDAGuard guard(device);
    for (int i = 0; i < n; ++i) {
        cudaStream_t s = nullptr;
        if (const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess) {
            for (const c10::Stream& made : streams_) (void)cudaStreamDestroy(c10::cuda::CUDAStream(made).stream());
            streams_.clear();
            C10_CUDA_CHECK(e);
        }
        streams_.push_back(c10::cuda::getStreamFromExternal(s, device.index()).unwrap());
    }
#else
    (void)device;
    (void)n;
#endif
}

void StreamLanes::follow_current() const {
#ifdef CN_WITH_CUDA
    if (streams_.empty()) return;
    const c10::DeviceIndex device = streams_.front().device_index();
    at::cuda::CUDAEvent queued;
    queued.record(c10::cuda::getCurrentCUDAStream(device));
    for (const c10::Stream& s : streams_) queued.block(c10::cuda::CUDAStream(s));
#endif
}

StreamLanes::~StreamLanes() {
#ifdef CN_WITH_CUDA
    for (const c10::Stream& s : streams_) {
        const c10::cuda::CUDAStream cs(s);
        // Nothing may be left running on a stream that is destroyed; errors are not thrown from a destructor.
        (void)cudaStreamSynchronize(cs.stream());
        (void)cudaStreamDestroy(cs.stream());
    }
#endif
}

}  // namespace cn
