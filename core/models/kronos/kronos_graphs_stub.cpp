// Kronos graph mode in CUDA-less builds (kronos_graphs.h): the same declarations, every function failing with
// kUnsupported. Such a build never has a CUDA model, so create() is never reached and nothing constructs one.
#include "core/models/kronos/kronos_graphs.h"

#include <string>

#include "core/common/status.h"

namespace cn::kronos {
namespace {

[[noreturn]] void no_cuda(const std::string& what) { fail(Status::kUnsupported, what + " needs CUDA, and this build has none"); }

}  // namespace

struct KronosGraphs::Step {};
struct KronosGraphs::Ends {};
struct KronosGraphs::Sliding {};

at::Generator cuda_generator(c10::Device) { no_cuda("a CUDA generator"); }

std::unique_ptr<KronosGraphs> KronosGraphs::create(const PredictorConfig&, const PredictorWeights&, const TokenizerConfig&,
                                                   const TokenizerWeights&, c10::Device) {
    no_cuda("graph mode");
}

KronosGraphs::~KronosGraphs() = default;

KronosGraphs::Step& KronosGraphs::step(const Lock&, int64_t, double, int64_t, double) { no_cuda("graph mode"); }
KronosGraphs::Ends& KronosGraphs::ends(const Lock&, Step&, int64_t, int64_t) { no_cuda("graph mode"); }
KronosGraphs::Ends* KronosGraphs::find_ends(const Lock&, Step&, int64_t, int64_t) { no_cuda("graph mode"); }
KronosGraphs::Sliding& KronosGraphs::sliding(const Lock&, int64_t, double, int64_t, double) { no_cuda("graph mode"); }

KronosGraphs::CallTokens KronosGraphs::replay_call(const Lock&, Step&, Ends&, const at::Tensor&, const at::Tensor&, int64_t, int64_t,
                                                   RunContext&) {
    no_cuda("graph mode");
}
KronosCache KronosGraphs::static_cache(const Lock&, Step&) { no_cuda("graph mode"); }
void KronosGraphs::replay_steps(const Lock&, Step&, const at::Tensor&, int64_t, int64_t, RunContext&, at::Tensor&, at::Tensor&) {
    no_cuda("graph mode");
}
std::pair<at::Tensor, at::Tensor> KronosGraphs::replay_sliding(const Lock&, Sliding&, const at::Tensor&, const at::Tensor&,
                                                               const at::Tensor&) {
    no_cuda("graph mode");
}

}  // namespace cn::kronos
