// A checkpoint on disk: one model.safetensors, or shards listed by model.safetensors.index.json, in one
// directory. Every file is mapped and validated at open; no tensor data is read until asked for.
// LibTorch-free (the runtime's weights layer turns entries into tensors).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/format/mapped_file.h"
#include "core/format/safetensors.h"

namespace cn::format {

class Checkpoint {
public:
    struct Shard {
        MappedFile file;
        SafetensorsHeader header;
    };
    struct Ref {
        const Shard* shard = nullptr;
        const TensorEntry* entry = nullptr;
        const uint8_t* bytes() const { return shard->file.data() + shard->header.data_offset + entry->begin; }
    };

    // Opens `<dir>/<stem>.safetensors.index.json` if present, else `<dir>/<stem>.safetensors`.
    // Throws cn::Error: kNotFound (no directory / no checkpoint file), kModelFormat (any validation
    // failure, naming the file and tensor; a tensor in two shards; a shard tensor absent from the index or
    // an index entry absent from its shard).
    static std::shared_ptr<const Checkpoint> open(const std::string& dir, const std::string& stem = "model");

    const std::string& dir() const { return dir_; }
    // nullptr if absent.
    const Ref* find(const std::string& name) const;
    const std::map<std::string, Ref>& tensors() const { return tensors_; }
    const std::vector<std::unique_ptr<Shard>>& shards() const { return shards_; }

private:
    std::string dir_;
    std::vector<std::unique_ptr<Shard>> shards_;
    std::map<std::string, Ref> tensors_;
};

// Opens a directory read-only and returns its descriptor (caller closes). Throws kNotFound / kInternal.
int open_directory(const std::string& dir);

}  // namespace cn::format
