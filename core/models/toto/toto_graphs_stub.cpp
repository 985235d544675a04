// Toto graph mode in CUDA-less builds (toto_graphs.h): the same declarations, failing with kUnsupported. Such a
// build never has a CUDA model, so create() is never reached.
#include "core/models/toto/toto_graphs.h"

#include "core/common/status.h"

namespace cn::toto {

struct TotoGraphs::Entry {};

std::unique_ptr<TotoGraphs> TotoGraphs::create(c10::Device, at::Generator) {
    fail(Status::kUnsupported, "graph mode needs CUDA, and this build has none");
}

TotoGraphs::~TotoGraphs() = default;

std::vector<at::Tensor> TotoGraphs::run(const TotoConfig&, const TotoWeights&, const Rotary&, const Mixture&, const KvCache&,
                                        const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t, int64_t, at::Generator&,
                                        RunContext&) {
    fail(Status::kUnsupported, "graph mode needs CUDA, and this build has none");
}

uint64_t TotoGraphs::pool_bytes() const { return 0; }

}  // namespace cn::toto
