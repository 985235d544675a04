#include "core/runtime/adapters.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "core/common/status.h"
#include "core/format/lora_keys.h"
#include "core/format/mapped_file.h"
#include "core/format/safetensors.h"
#include "core/runtime/run_context.h"
#include "core/runtime/weights.h"

namespace cn {
namespace {

std::atomic<uint64_t> g_next_id{1};

// The path with every symlink and ".." resolved; kNotFound when it does not exist.
std::string resolve(const std::string& path, const std::string& what) {
    char buf[PATH_MAX];
    if (!::realpath(path.c_str(), buf)) fail(Status::kNotFound, what + " \"" + path + "\": no such file or directory");
    return buf;
}

// A tensor of the file, as stored, on the CPU (a copy: the mapping is read-only and goes away).
at::Tensor read_tensor(const format::MappedFile& file, const format::SafetensorsHeader& header, const format::TensorEntry& e) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(to_scalar_type(e.dtype, e.name)));
    if (e.nbytes()) std::memcpy(t.data_ptr(), file.data() + header.data_offset + e.begin, e.nbytes());
    return t;
}

bool is_float(format::DType t) {
    return t == format::DType::kF32 || t == format::DType::kF16 || t == format::DType::kBF16 || t == format::DType::kF64;
}

}  // namespace

size_t Adapter::n_targets() const {
    std::vector<std::string> names;
    for (const Patch& p : patches_) names.push_back(p.target);
    std::sort(names.begin(), names.end());
    return static_cast<size_t>(std::unique(names.begin(), names.end()) - names.begin());
}

std::shared_ptr<const Adapter> Adapter::load(const std::string& path, const AdapterLoadOptions& opts, const WeightIndex& targets,
                                             c10::Device device, const void* owner) {
    if (path.empty()) fail(Status::kInvalidArgument, "adapter: the path is empty");
    const std::string file_path = resolve(path, "adapter");
    if (!opts.allowed_dir.empty()) {
        const std::string dir = resolve(opts.allowed_dir, "adapter directory");
        if (file_path.size() <= dir.size() + 1 || file_path.compare(0, dir.size(), dir) != 0 || file_path[dir.size()] != '/') {
            fail(Status::kInvalidArgument,
                 "adapter \"" + path + "\": outside the allowed directory " + opts.allowed_dir + " (resolved, symlinks followed)");
        }
    }
    struct stat st {};
    if (::stat(file_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        fail(Status::kInvalidArgument, "adapter \"" + path + "\": not a regular file");
    }
    if (static_cast<uint64_t>(st.st_size) > opts.max_file_bytes) {
        fail(Status::kInvalidArgument, "adapter \"" + path + "\": " + std::to_string(st.st_size) + " bytes, more than the limit of " +
                                           std::to_string(opts.max_file_bytes));
    }
    const format::MappedFile file = format::MappedFile::open_at(AT_FDCWD, file_path, path);
    const format::SafetensorsHeader header = format::parse_safetensors(file.data(), file.size(), path);

    std::vector<format::LoraTensorInfo> infos;
    std::map<std::string, const format::TensorEntry*> by_name;
    for (const format::TensorEntry& e : header.tensors) {
        format::LoraTensorInfo info{e.name, e.dtype, e.shape, std::nullopt};
        if (e.numel == 1 && e.dtype != format::DType::kBool && e.dtype != format::DType::kF8E4M3 && e.dtype != format::DType::kF8E5M2) {
            info.scalar = read_tensor(file, header, e).to(at::kDouble).item<double>();  // an alpha (kohya writes some as integers)
        }
        infos.push_back(std::move(info));
        by_name[e.name] = &e;
    }
    std::vector<format::LoraTargetInfo> target_infos;
    for (const auto& [name, entry] : targets.entries()) {
        const at::Tensor& t = entry.tensor;
        if (t.dim() == 2 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
            target_infos.push_back({name, t.size(0), t.size(1)});
        }
    }
    const format::LoraPlan plan = format::plan_lora(infos, header.metadata, target_infos, path);

    auto a = std::make_shared<Adapter>();
    a->path_ = path;
    a->family_ = plan.family;
    a->owner_ = owner;
    a->id_ = g_next_id.fetch_add(1);
    std::map<std::string, at::Tensor> factors;  // each file tensor read and checked once
    auto factor = [&](const std::string& name) -> const at::Tensor& {
        auto it = factors.find(name);
        if (it != factors.end()) return it->second;
        auto e = by_name.find(name);
        if (e == by_name.end()) fail(Status::kInternal, path + ": the plan names " + name + ", which the file lacks");
        if (!is_float(e->second->dtype)) fail(Status::kInvalidArgument, path + ": " + name + ": not a floating-point tensor");
        at::Tensor t = read_tensor(file, header, *e->second).to(at::kFloat);
        if (!at::isfinite(t).all().item<bool>()) fail(Status::kInvalidArgument, path + ": " + name + ": holds NaN or Inf values");
        return factors.emplace(name, t).first->second;
    };
    for (const format::LoraPatch& p : plan.patches) {
        Patch out;
        out.target = p.target;
        out.row_begin = p.row_begin;
        out.rows = p.rows;
        out.scale = p.scale;
        out.source = p.source;
        const at::Tensor& down = factor(p.down);
        const at::Tensor& up = factor(p.up);
        out.down = down.to(device).contiguous();
        out.up = up.narrow(0, p.up_row_begin, p.rows).to(device).contiguous();
        a->bytes_ += static_cast<uint64_t>(out.down.numel() + out.up.numel()) * sizeof(float);
        a->max_rank_ = std::max(a->max_rank_, p.rank);
        a->patches_.push_back(std::move(out));
    }
    return a;
}

AdapterHost::AdapterHost(WeightIndex targets) : targets_(std::move(targets)) {}

AdapterHost::Lease::~Lease() {
    if (!host_) return;
    std::lock_guard<std::mutex> lock(host_->mu_);
    --host_->holders_;
    host_->cv_.notify_all();
}

std::string AdapterHost::key_of(const std::vector<AdapterUse>& set) {
    std::string key;
    for (const AdapterUse& u : set) {
        uint32_t bits = 0;
        std::memcpy(&bits, &u.scale, sizeof bits);
        key += std::to_string(u.adapter->id()) + ":" + std::to_string(bits) + ",";
    }
    return key;
}

AdapterHost::Lease AdapterHost::hold(const std::vector<AdapterUse>& set, const RunContext& run) {
    for (const AdapterUse& u : set) {
        if (!u.adapter) fail(Status::kInvalidArgument, "adapter: none given");
        if (!std::isfinite(u.scale)) fail(Status::kInvalidArgument, "adapter " + u.adapter->path() + ": the scale is not finite");
    }
    const std::string key = key_of(set);
    std::unique_lock<std::mutex> lock(mu_);
    // A call with the set the weights hold joins the calls holding them, unless calls with another set wait to switch
    // (they would starve): it waits behind them. A call with another set waits until no call holds the weights, then
    // switches them. Waiting polls the call's cancel flag and deadline.
    bool counted = false;  // counted in switch_waiters_
    struct Uncount {
        AdapterHost* h;
        bool& counted;
        ~Uncount() {
            if (counted) {
                --h->switch_waiters_;
                h->cv_.notify_all();
            }
        }
    } uncount{this, counted};
    for (;;) {
        if (current_ == key && (counted || switch_waiters_ == 0)) break;
        if (current_ != key && holders_ == 0) {
            switch_to(set);
            cv_.notify_all();
            break;
        }
        if (current_ != key && !counted) {
            ++switch_waiters_;
            counted = true;
        }
        cv_.wait_for(lock, std::chrono::milliseconds(20));
        run.check();
    }
    ++holders_;
    return Lease(this);
}

namespace {
// current_ while the weights are being rewritten: no set's key, so a switch that failed half-way is never joined.
const char* const kSwitching = "\x01switching";
}  // namespace

void AdapterHost::restore_all() {
    current_ = kSwitching;
    for (const std::string& name : touched_) targets_.find(name)->tensor.copy_(originals_.at(name));
    touched_.clear();
    current_.clear();  // the empty set's key: the weights as loaded
}

void AdapterHost::switch_to(const std::vector<AdapterUse>& set) {
    const auto t0 = std::chrono::steady_clock::now();
    // The targets in the order their first patch comes, each with its patches in set order.
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::pair<const Adapter::Patch*, double>>> by_target;
    for (const AdapterUse& u : set) {
        for (const Adapter::Patch& p : u.adapter->patches()) {
            auto& list = by_target[p.target];
            if (list.empty()) order.push_back(p.target);
            list.emplace_back(&p, static_cast<double>(u.scale) * p.scale);
        }
    }
    // Every target can be written, checked before any weight changes (a refusal leaves the current set in place).
    for (const std::string& name : order) {
        const WeightIndex::Entry* e = targets_.find(name);
        if (!e) fail(Status::kInternal, "adapter: target " + name + " is not in the model's weights");
        if (e->aliases_file) {
            fail(Status::kInvalidArgument, "adapter: weight " + name +
                                               " is the read-only file mapping (the model was opened with "
                                               "mmap_weights); open it without to take adapters");
        }
    }
    // From here any failure (an allocation, a weight that is not finite) restores every weight the old or the new set
    // touched, so the weights hold the empty set; until the end they hold no set anyone may join.
    current_ = kSwitching;
    std::optional<c10::Device> device;
    try {
        // Weights only the current set touched go back to their originals; the others stay in touched_ (still
        // changed) until they are rewritten from their originals below, never patched on top of the current values.
        std::vector<std::string> still;
        for (const std::string& name : touched_) {
            if (by_target.count(name)) {
                still.push_back(name);
                continue;
            }
            at::Tensor w = targets_.find(name)->tensor;
            w.copy_(originals_.at(name));
            device = w.device();
        }
        touched_ = std::move(still);
        const std::set<std::string> listed(touched_.begin(), touched_.end());
        // One finiteness flag per fused weight (checked in the weight's own dtype: an fp16 weight overflows where the
        // fp32 sum did not), read once at the end: no host wait per weight.
        std::vector<at::Tensor> finite;
        for (const std::string& name : order) {
            at::Tensor w = targets_.find(name)->tensor;
            auto orig = originals_.find(name);
            if (orig == originals_.end()) {
                orig = originals_.emplace(name, w.clone()).first;
                stats_.backup_bytes += static_cast<uint64_t>(w.numel()) * w.element_size();
            }
            if (!listed.count(name)) touched_.push_back(name);  // before the write: a failure from here restores it
            at::Tensor fused = orig->second.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
            for (const auto& [p, s] : by_target[name]) fused.narrow(0, p->row_begin, p->rows).addmm_(p->up, p->down, 1.0, s);
            w.copy_(fused);  // rounds to the weight's dtype (round to nearest even)
            finite.push_back(at::isfinite(w).all());
            device = w.device();
        }
        if (!finite.empty()) {
            const at::Tensor ok = at::stack(finite).cpu();  // waits for the device work
            const bool* f = ok.const_data_ptr<bool>();
            for (size_t i = 0; i < order.size(); ++i) {
                if (!f[i]) fail(Status::kInvalidArgument, "adapter: the fused weight " + order[i] + " is not finite (scale too large?)");
            }
        } else if (device && !device->is_cpu()) {
            c10::impl::VirtualGuardImpl(device->type()).getStream(*device).synchronize();  // the restores are done
        }
    } catch (...) {
        restore_all();
        throw;
    }
    current_ = key_of(set);
    ++stats_.switches;
    stats_.switch_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

AdapterHost::Stats AdapterHost::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    Stats s = stats_;
    s.touched = touched_.size();
    return s;
}

}  // namespace cn
