// Turns validated checkpoint entries into at::Tensors on the model's device and dtype. The model first
// declares every tensor it needs with its expected shape (`expect`), `validate` checks the whole set
// (missing, extra, mis-shaped) before any device memory is allocated, then `load` materialises each one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "core/format/checkpoint.h"

namespace cn {

struct WeightLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;  // floating tensors are converted to this
    bool zero_copy = false;               // CPU tensors already in `dtype` alias the file mapping
    bool check_finite = false;            // reject NaN/Inf weights
};

class Weights {
public:
    Weights(std::shared_ptr<const format::Checkpoint> checkpoint, WeightLoadOptions options);

    // Declares a required tensor and its shape.
    void expect(const std::string& name, std::vector<int64_t> shape);
    // Declares a tensor the checkpoint may carry that the model does not use (e.g. BERT's pooler); it is
    // neither loaded nor counted, and any dtype is accepted.
    void allow_unused(const std::string& name) { unused_.insert(name); }
    // Checks the declared set against the checkpoint: every expected tensor present with its shape and a
    // floating dtype, no tensor left undeclared. Throws cn::Error(kModelFormat) naming the tensor.
    void validate() const;
    // Loads a declared tensor (after validate) as options.dtype on options.device; `dtype` overrides the
    // dtype for tensors the model keeps in another precision.
    at::Tensor load(const std::string& name) const;
    at::Tensor load(const std::string& name, c10::ScalarType dtype) const;

    const format::Checkpoint& checkpoint() const { return *checkpoint_; }
    const WeightLoadOptions& options() const { return options_; }
    uint64_t expected_elements() const;

private:
    std::shared_ptr<const format::Checkpoint> checkpoint_;
    WeightLoadOptions options_;
    std::map<std::string, std::vector<int64_t>> expected_;
    std::set<std::string> unused_;
};

// The at::ScalarType of a safetensors dtype; throws kModelFormat for dtypes LibTorch cannot hold.
c10::ScalarType to_scalar_type(format::DType t, const std::string& tensor_name);

// Materialises one checkpoint entry on CPU in its stored dtype, aliasing the mapping when aligned (the
// tensor keeps the checkpoint alive) and copying otherwise.
at::Tensor tensor_view(const std::shared_ptr<const format::Checkpoint>& checkpoint, const format::Checkpoint::Ref& ref);

}  // namespace cn
