// Turns validated checkpoint entries into at::Tensors on the model's device and dtype. Each tensor is written
// once, in the model's weight list: `declare` names it with its expected shape, flags and the at::Tensor it is
// loaded into; `validate` checks the whole list against the checkpoint (missing, extra, mis-shaped) before any
// device memory is allocated, then `load_all` materialises every declared tensor into its destination.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "core/format/checkpoint.h"
#include "core/runtime/weight_index.h"

namespace cn {

struct WeightLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;  // floating tensors are converted to this
    bool zero_copy = false;               // CPU tensors already in `dtype` alias the file mapping
    bool check_finite = false;            // reject NaN/Inf weights
};

// How a declared tensor is checked and loaded.
struct WeightFlags {
    bool optional = false;                 // absent is fine (the destination stays undefined); present, it must match
    bool buffer = false;                   // a buffer, not a parameter: not counted in expected_elements()
    std::optional<c10::ScalarType> dtype;  // load in this dtype instead of the options' (e.g. fp32 tables)
};

class Weights {
public:
    Weights(std::shared_ptr<const format::Checkpoint> checkpoint, WeightLoadOptions options);

    // Declares a tensor, its shape and where load_all() puts it. `dst` must outlive load_all() (size the
    // model's containers before declaring into them).
    void declare(at::Tensor& dst, const std::string& name, std::vector<int64_t> shape, WeightFlags flags = {});
    // Declares a tensor the checkpoint may carry that the model does not use (e.g. BERT's pooler); it is
    // neither loaded nor counted, and any dtype is accepted.
    void allow_unused(const std::string& name) { unused_.insert(name); }
    // Checks the declared list against the checkpoint: every required tensor present (optional ones when
    // present) with its shape and a floating dtype, no tensor left undeclared. Throws cn::Error(kModelFormat)
    // naming the tensor.
    void validate() const;
    // Loads every declared tensor the checkpoint has (after validate) on options.device, in options.dtype
    // unless its flags name another, into its destination.
    // Once: the destinations are forgotten afterwards (a second call is kInternal), so no pointer into a model's
    // containers outlives the load; what was loaded stays reachable by name through index().
    void load_all();
    // The loaded tensors by name (after load_all): a model keeps it (weight_index.h).
    const WeightIndex& index() const { return index_; }
    // Moves the index out (an architecture that fuses weights after the load updates it, then hands it to the model).
    WeightIndex take_index() { return std::move(index_); }

    const format::Checkpoint& checkpoint() const { return *checkpoint_; }
    const WeightLoadOptions& options() const { return options_; }
    // Elements of the declared parameters (required ones, and optional ones the checkpoint has; no buffers).
    uint64_t expected_elements() const;

private:
    struct Decl {
        std::vector<int64_t> shape;
        at::Tensor* dst = nullptr;
        WeightFlags flags;
    };
    at::Tensor load(const std::string& name, c10::ScalarType dtype) const;

    std::shared_ptr<const format::Checkpoint> checkpoint_;
    WeightLoadOptions options_;
    std::map<std::string, Decl> declared_;
    std::set<std::string> unused_;
    WeightIndex index_;
    bool loaded_ = false;
};

// The at::ScalarType of a safetensors dtype; throws kModelFormat for dtypes LibTorch cannot hold.
c10::ScalarType to_scalar_type(format::DType t, const std::string& tensor_name);

// Materialises one checkpoint entry on CPU in its stored dtype, aliasing the mapping when aligned (the
// tensor keeps the checkpoint alive) and copying otherwise.
at::Tensor tensor_view(const std::shared_ptr<const format::Checkpoint>& checkpoint, const format::Checkpoint::Ref& ref);

}  // namespace cn
