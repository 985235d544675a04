// Graph mode for Chronos-2: one CUDA graph per shape bucket, captured on first use and replayed.
// A bucket is (rows padded up to a power of two, context length, output patches, future covariates
// present, singleton groups, the pipeline's lane). Padding rows hold a constant dummy series in a group of its own; since
// every layer runs per series, the real rows' results are bit-identical to eager mode. Time is never
// padded (the context length is part of the key), because that would shift RoPE positions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include <ATen/core/Tensor.h>

#include "core/models/chronos2/chronos2_config.h"
#include "core/models/chronos2/chronos2_forward.h"
#include "core/runtime/graph_cache.h"
#include "core/runtime/stream_lanes.h"

namespace cn::chronos2 {

class GraphCache {
public:
    // `fn` is the pass to capture: forward (graph mode) or forward_fused (fused mode).
    GraphCache(const Chronos2Config& cfg, const Chronos2Weights& w, c10::ScalarType dtype, c10::Device device, ForwardFn fn = forward,
               size_t max_graphs = 64);
    ~GraphCache();
    GraphCache(const GraphCache&) = delete;
    GraphCache& operator=(const GraphCache&) = delete;

    // Same contract as forward(); inputs on the device or page-locked on the host. Queued on the current stream;
    // calls are serialised (the graphs own static buffers), and a graph replayed on another stream than its last
    // replay waits for that one. `lane`: which of the pipeline's streams the call runs on, -1 for the caller's (part
    // of the key: passes queued on different lanes run side by side, each on graphs of its own, captured on a
    // private stream per lane so that they share no ATen workspace). Returns a fresh tensor [B, Q, N * patch].
    at::Tensor run(const at::Tensor& context, const at::Tensor& group_ids, const at::Tensor& future_covariates, int64_t num_output_patches,
                   bool singleton_groups, int lane);

    // Device bytes the captured graphs keep (their memory pools and static buffers); read without the lock.
    uint64_t pool_bytes() const;
    size_t size() const;

private:
    struct Entry;
    using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int>;  // rows bucket, L, N, future, singleton, lane
    std::unique_ptr<Entry> capture(const Key& key);
    c10::Stream capture_stream(int lane);  // under the pool's lock

    const Chronos2Config& cfg_;
    const Chronos2Weights& w_;
    c10::ScalarType dtype_;
    c10::Device device_;
    ForwardFn fn_;
    GraphPool pool_;                                               // the mutex serialising run(), and the bytes of every entry
    std::map<int, std::unique_ptr<StreamLanes>> capture_streams_;  // per lane: declared before entries_, which go first
    LruGraphCache<Key, Entry> entries_;                            // up to max_graphs, least recently used evicted
};

}  // namespace cn::chronos2
