#include "core/runtime/weights.h"

#include <utility>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include "core/common/status.h"
#include "kernels/nonfinite.h"

namespace cn {
namespace {

std::string shape_str(c10::IntArrayRef s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

bool is_floating(format::DType t) {
    return t == format::DType::kF32 || t == format::DType::kF16 || t == format::DType::kBF16 || t == format::DType::kF64;
}

}  // namespace

c10::ScalarType to_scalar_type(format::DType t, const std::string& tensor_name) {
    using format::DType;
    switch (t) {
        case DType::kBool: return c10::kBool;
        case DType::kU8: return c10::kByte;
        case DType::kI8: return c10::kChar;
        case DType::kI16: return c10::kShort;
        case DType::kU16: return c10::kUInt16;
        case DType::kF16: return c10::kHalf;
        case DType::kBF16: return c10::kBFloat16;
        case DType::kI32: return c10::kInt;
        case DType::kU32: return c10::kUInt32;
        case DType::kF32: return c10::kFloat;
        case DType::kF64: return c10::kDouble;
        case DType::kI64: return c10::kLong;
        case DType::kU64: return c10::kUInt64;
        case DType::kF8E4M3: return c10::kFloat8_e4m3fn;
        case DType::kF8E5M2: return c10::kFloat8_e5m2;
    }
    fail(Status::kModelFormat, "tensor \"" + tensor_name + "\": unsupported dtype");
}

at::Tensor tensor_view(const std::shared_ptr<const format::Checkpoint>& checkpoint, const format::Checkpoint::Ref& ref) {
    const auto& e = *ref.entry;
    const c10::ScalarType st = to_scalar_type(e.dtype, e.name);
    const size_t elem = format::dtype_size(e.dtype);
    auto opts = at::TensorOptions().dtype(st).device(c10::kCPU);
    const uint8_t* p = ref.bytes();
    if (e.numel == 0) return at::empty(e.shape, opts);
    if (reinterpret_cast<uintptr_t>(p) % elem == 0) {
        // The mapping is read-only: model code never writes weights in place.
        auto keep = checkpoint;
        return at::from_blob(const_cast<uint8_t*>(p), e.shape, [keep](void*) {}, opts);
    }
    at::Tensor t = at::empty(e.shape, opts);
    std::memcpy(t.data_ptr(), p, e.nbytes());
    return t;
}

Weights::Weights(std::shared_ptr<const format::Checkpoint> checkpoint, WeightLoadOptions options)
    : checkpoint_(std::move(checkpoint)), options_(options) {}

void Weights::declare(at::Tensor& dst, const std::string& name, std::vector<int64_t> shape, WeightFlags flags) {
    if (declared_.count(name)) fail(Status::kInternal, "weights: tensor \"" + name + "\" declared twice");
    declared_[name] = Decl{std::move(shape), &dst, flags};
}

void Weights::validate() const {
    const std::string& dir = checkpoint_->dir();
    for (const auto& [name, decl] : declared_) {
        const std::vector<int64_t>& shape = decl.shape;
        const auto* ref = checkpoint_->find(name);
        if (!ref && decl.flags.optional) continue;
        if (!ref) fail(Status::kModelFormat, dir + ": missing tensor \"" + name + "\" (expected shape " + shape_str(shape) + ")");
        if (ref->entry->shape != shape) {
            fail(Status::kModelFormat, dir + ": tensor \"" + name + "\" has shape " + shape_str(ref->entry->shape) +
                                           " but the config implies " + shape_str(shape));
        }
        if (!is_floating(ref->entry->dtype)) {
            fail(Status::kModelFormat,
                 dir + ": tensor \"" + name + "\" has dtype " + format::dtype_name(ref->entry->dtype) + ", expected a floating type");
        }
    }
    for (const auto& [name, ref] : checkpoint_->tensors()) {
        if (!declared_.count(name) && !unused_.count(name)) fail(Status::kModelFormat, dir + ": unexpected tensor \"" + name + "\"");
    }
}

uint64_t Weights::expected_elements() const {
    uint64_t n = 0;
    for (const auto& [name, decl] : declared_) {
        if (decl.flags.buffer || (decl.flags.optional && !checkpoint_->find(name))) continue;
        uint64_t e = 1;
        for (int64_t d : decl.shape) e *= static_cast<uint64_t>(d);
        n += e;
    }
    return n;
}

void Weights::load_all() {
    if (loaded_) fail(Status::kInternal, "weights: load_all called twice");
    loaded_ = true;
    for (auto& [name, decl] : declared_) {
        at::Tensor* dst = std::exchange(decl.dst, nullptr);
        if (decl.flags.optional && !checkpoint_->find(name)) continue;
        const c10::ScalarType dtype = decl.flags.dtype.value_or(options_.dtype);
        *dst = load(name, dtype);
        // load() aliases the mapping in exactly this case (or copies an unaligned entry: counted as aliased anyway).
        const bool aliases =
            options_.zero_copy && options_.device.is_cpu() && to_scalar_type(checkpoint_->find(name)->entry->dtype, name) == dtype;
        index_.set(name, *dst, aliases);
    }
}

at::Tensor Weights::load(const std::string& name, c10::ScalarType dtype) const {
    const auto* ref = checkpoint_->find(name);
    if (!ref) fail(Status::kInternal, "weights: tensor \"" + name + "\" is not in the checkpoint");
    at::Tensor t = tensor_view(checkpoint_, *ref);
    const bool alias_ok = options_.zero_copy && options_.device.is_cpu() && t.scalar_type() == dtype;
    // copy=true detaches same-dtype CPU tensors from the mapping unless aliasing was asked for.
    at::Tensor out = alias_ok ? t : t.to(options_.device, dtype, /*non_blocking=*/false, /*copy=*/true);
    if (options_.check_finite) {
        // Checked on the stored values: a conversion to a narrower dtype may overflow to Inf by itself.
        const int64_t bad = kernels::count_nonfinite(t.device() == out.device() ? t : t.to(out.device()));
        if (bad) {
            fail(Status::kModelFormat, checkpoint_->dir() + ": tensor \"" + name + "\" holds " + std::to_string(bad) + " NaN/Inf value(s)");
        }
    }
    return out;
}

}  // namespace cn
