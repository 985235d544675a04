// Chronos-2 graph mode in CUDA-less builds (chronos2_graphs.h): the same declarations, the constructor failing
// with kUnsupported. Such a build has no CUDA model, so no GraphCache is ever made and the other functions are
// unreachable; they fail the same way.
#include "core/common/status.h"
#include "core/models/chronos2/chronos2_graphs.h"

namespace cn::chronos2 {
namespace {

[[noreturn]] void no_cuda() { fail(Status::kUnsupported, "graph mode needs CUDA, and this build has none"); }

}  // namespace

struct GraphCache::Entry {};

GraphCache::GraphCache(const Chronos2Config& cfg, const Chronos2Weights& w, c10::ScalarType dtype, c10::Device device, ForwardFn fn,
                       size_t max_graphs)
    : cfg_(cfg), w_(w), dtype_(dtype), device_(device), fn_(fn), pool_([] { return int64_t{0}; }), entries_(pool_, max_graphs) {
    no_cuda();
}

GraphCache::~GraphCache() = default;

std::unique_ptr<GraphCache::Entry> GraphCache::capture(const Key&) { no_cuda(); }

at::Tensor GraphCache::run(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, bool, int) { no_cuda(); }

uint64_t GraphCache::pool_bytes() const { return pool_.bytes(); }

size_t GraphCache::size() const { return 0; }

}  // namespace cn::chronos2
