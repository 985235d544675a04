// LoRA adapters: a file read once and validated against one model (Adapter), and the one place that changes a
// model's weights for them (AdapterHost). What a file's keys mean is core/format/lora_keys.h's; this is the LibTorch
// side.
//
// Fuse and restore. For each weight an adapter set touches, in fp32:
//     W = round_to_storage(fp32(W0) + sum_i s_i * B_i @ A_i)       (s_i = user scale x the adapter's alpha / rank)
// written in place (same storage: tensors captured by CUDA graphs stay valid); the products are added to fp32(W0)
// in turn, in the order of the set and then of each adapter's patches, each as one GEMM (addmm, alpha = s_i). W0, the weight as loaded, is kept (a copy in the weight's
// own dtype, on its device) the first time a weight is touched, and restoring is a copy back: bit for bit, however
// many sets come and go (diffusers' unfuse subtracts a recomputed delta and drifts). Switching sets restores what
// the current set touched, then fuses the new one from W0: never a subtraction.
//
// Concurrency. Calls holding the same set run together; a call with another set waits until no call holds the
// weights, then switches them (AdapterHost::hold). The wait honours the call's cancel flag and deadline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "core/runtime/requests.h"  // AdapterUse
#include "core/runtime/weight_index.h"

namespace cn {

class RunContext;

struct AdapterLoadOptions {
    // "" : the path is trusted as given (a C caller's own file). Otherwise the file, with every symlink and ".."
    // resolved, must lie under this directory (resolved the same way): a server names only files it allows.
    std::string allowed_dir;
    uint64_t max_file_bytes = uint64_t{2} << 30;  // checked before the file is read
};

class Adapter {
public:
    struct Patch {
        std::string target;  // a weight of the model's index
        int64_t row_begin = 0, rows = 0;
        at::Tensor down, up;  // fp32 on the model's device: [r, in] and [rows, r]
        double scale = 1;     // the file's alpha / rank (metadata, rslora...), the user's scale excluded
        std::string source;   // the file's module key, for messages
    };

    // Reads `path` (.safetensors), plans its keys against the 2-D "*.weight" entries of `targets` and keeps the
    // factors in fp32 on `device`. `owner` identifies the model it is valid for. Throws cn::Error naming the file and
    // key: kNotFound, kPermissionDenied-like kInvalidArgument for a path outside allowed_dir, kInvalidArgument for a
    // file that does not fit the model or holds non-finite factors, kUnsupported for formats cutenative refuses
    // (DoRA, LoKr, LoHa, ...), kModelFormat for a malformed file.
    static std::shared_ptr<const Adapter> load(const std::string& path, const AdapterLoadOptions& opts, const WeightIndex& targets,
                                               c10::Device device, const void* owner);

    const std::vector<Patch>& patches() const { return patches_; }
    const std::string& path() const { return path_; }
    const std::string& family() const { return family_; }
    const void* owner() const { return owner_; }
    uint64_t id() const { return id_; }
    uint64_t factor_bytes() const { return bytes_; }
    int64_t max_rank() const { return max_rank_; }
    size_t n_targets() const;

private:
    std::vector<Patch> patches_;
    std::string path_, family_;
    const void* owner_ = nullptr;
    uint64_t id_ = 0, bytes_ = 0;
    int64_t max_rank_ = 0;
};

class AdapterHost {
public:
    // `targets`: the weights adapters may patch (the model's index, or the part of it that takes adapters).
    explicit AdapterHost(WeightIndex targets);

    const WeightIndex& targets() const { return targets_; }

    // While a Lease lives, the weights hold the set it was taken for.
    class Lease {
    public:
        Lease(Lease&& o) noexcept : host_(o.host_) { o.host_ = nullptr; }
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        Lease& operator=(Lease&&) = delete;
        ~Lease();

    private:
        friend class AdapterHost;
        explicit Lease(AdapterHost* h) : host_(h) {}
        AdapterHost* host_;
    };
    // Waits (checking `run`: kCancelled, kDeadlineExceeded) until the weights can hold `set`, switches them if they
    // hold another, and returns the lease. Throws kInvalidArgument for an adapter of another model, or when a fused
    // weight would not be finite (the weights are restored first).
    Lease hold(const std::vector<AdapterUse>& set, const RunContext& run);

    struct Stats {
        uint64_t switches = 0;      // sets fused (the empty set: a restore)
        double switch_seconds = 0;  // the time they took, in total (device work included)
        uint64_t backup_bytes = 0;  // the kept originals of the weights ever touched
        uint64_t touched = 0;       // weights the current set changes
    };
    Stats stats() const;

private:
    static std::string key_of(const std::vector<AdapterUse>& set);
    void switch_to(const std::vector<AdapterUse>& set);  // under mu_, with no call holding the weights
    void restore_all();

    WeightIndex targets_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    int holders_ = 0;
    int switch_waiters_ = 0;            // calls waiting to switch the weights to another set
    std::string current_;               // key_of the set the weights hold ("" : none)
    std::vector<std::string> touched_;  // weights the current set changed
    std::map<std::string, at::Tensor> originals_;
    Stats stats_;
};

}  // namespace cn
