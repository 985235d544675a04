// Z-Image graph replays (CUDA): each DiT forward of a request replayed from a CUDA graph captured once per
// (path, batch, latent h x w, caption lengths) -- the shape key of zimage_geometry.h -- on static inputs (the
// latents, the timestep, the refined captions) that every forward copies its own into. Graph mode replays the
// eager path (its images are eager's, bit for bit: the same kernels on the same inputs); fused mode on CUDA
// replays the fused path the same way. Entries are kept least recently used first, at most kMaxEntries (each holds
// one forward's activations in its pool: ~1 GB at 1024^2); adapters patch the weights in place, so graphs stay
// valid across adapter switches. CUDA builds only; elsewhere create() fails with kUnsupported
// (zimage_graphs_stub.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "core/models/zimage/zimage_dit.h"
#include "core/runtime/graph_cache.h"

namespace cn::zimage {

class ZImageGraphs {
public:
    static constexpr size_t kMaxEntries = 4;

    static std::unique_ptr<ZImageGraphs> create(c10::Device device);
    ~ZImageGraphs();
    ZImageGraphs(const ZImageGraphs&) = delete;
    ZImageGraphs& operator=(const ZImageGraphs&) = delete;

    // A generation holds the lock for its whole call (the entries' static buffers are shared): calls take turns.
    GraphPool::Lock lock() const { return pool_.lock(); }

    // dit.forward(x, t, cap_feats, g, fused), replayed: the entry for (fused, g.key()) captured on first use (an
    // eager warm-up forward, then the capture), the inputs copied into its static buffers on the current stream.
    // Returns a fresh tensor.
    at::Tensor forward(const GraphPool::Lock& lock, const ZImageDit& dit, const at::Tensor& x, const at::Tensor& t,
                       const at::Tensor& cap_feats, const DitGeometry& g, bool fused);

    // Device bytes the captured graphs keep; read without the lock.
    uint64_t pool_bytes() const { return pool_.bytes(); }
    size_t size(const GraphPool::Lock& lock) const { return entries_.size(lock); }

private:
    struct Entry;
    explicit ZImageGraphs(c10::Device device);
    c10::Device device_;
    GraphPool pool_;
    LruGraphCache<std::vector<int64_t>, Entry> entries_;
};

}  // namespace cn::zimage
