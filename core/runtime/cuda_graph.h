// CUDA-graph capture shared by the models' graph caches (CUDA builds only).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include <ATen/core/Generator.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace cn {

// Device bytes LibTorch's caching allocator has reserved on `device` (to measure what a capture keeps).
int64_t reserved_bytes(c10::Device device);

// Captures `pass` into `graph` on a side stream of `device`: first waits for the current stream (the static
// inputs were filled there; reading them early is a race), runs `warmup` eagerly on the side stream (cuBLAS
// handles, workspaces; it must leave the static state as the capture expects it), registers `gen` with the
// graph when given, captures in thread-local mode (other threads' CUDA calls cannot invalidate it), and ends
// the capture before rethrowing if `pass` throws. Returns when the side stream is idle. `on`: the side stream to
// capture on instead of one of ATen's shared pool streams (ATen's cuBLAS workspace is kept per stream, and a graph
// keeps the address of its capture stream's: graphs that may replay side by side must be captured on different
// streams).
void capture_graph(at::cuda::CUDAGraph& graph, c10::Device device, const std::function<void()>& warmup, const std::function<void()>& pass,
                   const at::Generator* gen = nullptr, std::optional<c10::Stream> on = std::nullopt);

}  // namespace cn
