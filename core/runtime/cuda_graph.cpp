#include "core/runtime/cuda_graph.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace cn {

int64_t reserved_bytes(c10::Device d) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(d.index());
    return stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
}

void capture_graph(at::cuda::CUDAGraph& graph, c10::Device device, const std::function<void()>& warmup, const std::function<void()>& pass,
                   const at::Generator* gen, std::optional<c10::Stream> on) {
    c10::cuda::CUDAStream stream = on ? c10::cuda::CUDAStream(*on) : c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
    {
        c10::cuda::CUDAStreamGuard guard(stream);
        warmup();
        stream.synchronize();
        if (gen) graph.register_generator_state(*gen);
        graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
        try {
            pass();
        } catch (...) {
            // End the capture so the stream is usable again, then report the original failure.
            try {
                graph.capture_end();
            } catch (...) {}
            throw;
        }
        graph.capture_end();
    }
    stream.synchronize();
}

}  // namespace cn
