// Z-Image graph replays in CUDA-less builds (zimage_graphs.h): the same declarations, create() failing with
// kUnsupported. Such a build has no CUDA model, so no ZImageGraphs is ever made and forward() is unreachable.
#include "core/common/status.h"
#include "core/models/zimage/zimage_graphs.h"

namespace cn::zimage {

struct ZImageGraphs::Entry {};

std::unique_ptr<ZImageGraphs> ZImageGraphs::create(c10::Device) {
    fail(Status::kUnsupported, "graph mode needs CUDA, and this build has none");
}

ZImageGraphs::ZImageGraphs(c10::Device device) : device_(device), pool_([] { return int64_t{0}; }), entries_(pool_, kMaxEntries) {}

ZImageGraphs::~ZImageGraphs() = default;

at::Tensor ZImageGraphs::forward(const GraphPool::Lock&, const ZImageDit&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                 const DitGeometry&, bool) {
    fail(Status::kUnsupported, "graph mode needs CUDA, and this build has none");
}

}  // namespace cn::zimage
