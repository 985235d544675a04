// A model's loaded weights by state-dict name, kept after the load: the one place where what changes weights after
// load (adapters now, quantized formats next) finds its targets, without per-model code. Each entry shares the
// storage of the tensor the model computes with, so an in-place change through the index is the model's change.
// An architecture that replaces a loaded tensor after the load (a fused weight whose parts become its row slices)
// registers the replacement with set().
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

namespace cn {

class WeightIndex {
public:
    struct Entry {
        at::Tensor tensor;
        bool aliases_file = false;  // a CPU tensor on the read-only file mapping (mmap_weights): never written
    };

    void set(const std::string& name, at::Tensor t, bool aliases_file = false) { entries_[name] = Entry{std::move(t), aliases_file}; }
    // nullptr when absent.
    const Entry* find(const std::string& name) const {
        auto it = entries_.find(name);
        return it == entries_.end() ? nullptr : &it->second;
    }
    const std::map<std::string, Entry>& entries() const { return entries_; }
    bool empty() const { return entries_.empty(); }

private:
    std::map<std::string, Entry> entries_;
};

}  // namespace cn
