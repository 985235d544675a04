#include "core/format/safetensors.h"

#include <algorithm>
#include <cstring>

#include "core/common/checked.h"
#include "core/common/status.h"
#include "core/format/json_strict.h"

namespace cn::format {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian; so must the host be");

struct DTypeInfo {
    const char* name;
    DType type;
    size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {"BOOL", DType::kBool, 1}, {"U8", DType::kU8, 1},          {"I8", DType::kI8, 1},          {"I16", DType::kI16, 2},
    {"U16", DType::kU16, 2},   {"F16", DType::kF16, 2},        {"BF16", DType::kBF16, 2},      {"I32", DType::kI32, 4},
    {"U32", DType::kU32, 4},   {"F32", DType::kF32, 4},        {"F64", DType::kF64, 8},        {"I64", DType::kI64, 8},
    {"U64", DType::kU64, 8},   {"F8_E4M3", DType::kF8E4M3, 1}, {"F8_E5M2", DType::kF8E5M2, 1},
};

[[noreturn]] void bad(std::string_view label, const std::string& what) { fail(Status::kModelFormat, std::string(label) + ": " + what); }

TensorEntry parse_entry(std::string_view label, const std::string& name, const nlohmann::json& j) {
    const std::string where = "tensor \"" + name + "\": ";
    if (!j.is_object()) bad(label, where + "entry is not an object");
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets") {
            bad(label, where + "unknown field \"" + it.key() + "\"");
        }
    }
    TensorEntry e;
    e.name = name;

    auto dt = j.find("dtype");
    if (dt == j.end() || !dt->is_string()) bad(label, where + "missing or non-string \"dtype\"");
    const auto& dts = dt->get_ref<const std::string&>();
    const DTypeInfo* info = nullptr;
    for (const auto& d : kDTypes) {
        if (dts == d.name) info = &d;
    }
    if (!info) bad(label, where + "unsupported dtype \"" + dts + "\"");
    e.dtype = info->type;

    auto sh = j.find("shape");
    if (sh == j.end() || !sh->is_array()) bad(label, where + "missing or non-array \"shape\"");
    if (sh->size() > kMaxRank) bad(label, where + "rank " + std::to_string(sh->size()) + " exceeds " + std::to_string(kMaxRank));
    uint64_t numel = 1;
    for (const auto& d : *sh) {
        if (!d.is_number_unsigned() && !d.is_number_integer()) bad(label, where + "shape entries must be integers");
        if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0) bad(label, where + "negative dimension");
        const uint64_t v = d.get<uint64_t>();
        if (v > static_cast<uint64_t>(kMaxDim)) bad(label, where + "dimension " + std::to_string(v) + " exceeds 2^40");
        e.shape.push_back(static_cast<int64_t>(v));
        auto m = checked_mul(numel, v);
        if (!m) bad(label, where + "element count overflows");
        numel = *m;
    }
    e.numel = numel;

    auto off = j.find("data_offsets");
    if (off == j.end() || !off->is_array() || off->size() != 2) bad(label, where + "\"data_offsets\" must be [begin, end]");
    for (const auto& o : *off) {
        if (!o.is_number_unsigned()) bad(label, where + "data_offsets must be non-negative integers");
    }
    e.begin = (*off)[0].get<uint64_t>();
    e.end = (*off)[1].get<uint64_t>();
    if (e.end < e.begin) bad(label, where + "data_offsets end < begin");
    auto nbytes = checked_mul(numel, info->size);
    if (!nbytes) bad(label, where + "byte size overflows");
    if (e.end - e.begin != *nbytes) {
        bad(label, where + "data_offsets span " + std::to_string(e.end - e.begin) + " bytes but " + dts + " " + "shape needs " +
                       std::to_string(*nbytes));
    }
    return e;
}

}  // namespace

size_t dtype_size(DType t) {
    for (const auto& d : kDTypes) {
        if (d.type == t) return d.size;
    }
    return 0;
}

const char* dtype_name(DType t) {
    for (const auto& d : kDTypes) {
        if (d.type == t) return d.name;
    }
    return "?";
}

SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, std::string_view label) {
    if (data == nullptr && size != 0) bad(label, "no data");
    if (size < 8) bad(label, "file of " + std::to_string(size) + " bytes is too short for a safetensors header");
    uint64_t n = 0;
    std::memcpy(&n, data, 8);  // little-endian host (static_assert above)
    if (n > kMaxHeaderBytes) bad(label, "header length " + std::to_string(n) + " exceeds the limit of 100000000");
    auto data_offset = checked_add(8, n);
    if (!data_offset || *data_offset > size) {
        bad(label, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) + " bytes)");
    }
    if (n < 2 || data[8] != '{') bad(label, "header does not start with '{'");
    std::string_view text(reinterpret_cast<const char*>(data + 8), n);
    // Trailing spaces pad the header to an alignment; strip them before parsing.
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    const nlohmann::json root = parse_json_strict(text, label, JsonLimits{kMaxHeaderBytes, 8});
    if (!root.is_object()) bad(label, "header is not a JSON object");

    SafetensorsHeader h;
    h.header_bytes = n;
    h.data_offset = *data_offset;
    for (auto it = root.begin(); it != root.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!it->is_object()) bad(label, "__metadata__ is not an object");
            for (auto m = it->begin(); m != it->end(); ++m) {
                if (!m->is_string()) bad(label, "__metadata__ value of \"" + m.key() + "\" is not a string");
                h.metadata.emplace(m.key(), m->get<std::string>());
            }
            continue;
        }
        if (it.key().empty()) bad(label, "tensor with an empty name");
        h.tensors.push_back(parse_entry(label, it.key(), *it));
    }

    // Offsets: sorted, contiguous from 0, ending exactly at the end of the file.
    std::sort(h.tensors.begin(), h.tensors.end(),
              [](const TensorEntry& a, const TensorEntry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    const uint64_t data_len = size - *data_offset;
    uint64_t expect = 0;
    for (const auto& t : h.tensors) {
        if (t.begin != expect) {
            bad(label, "tensor \"" + t.name + "\" starts at " + std::to_string(t.begin) + ", expected " + std::to_string(expect) +
                           (t.begin < expect ? " (overlap)" : " (hole)"));
        }
        expect = t.end;
    }
    if (expect != data_len) {
        bad(label, "tensors cover " + std::to_string(expect) + " bytes but the data region has " + std::to_string(data_len) +
                       (expect > data_len ? " (truncated file)" : " (trailing bytes)"));
    }
    return h;
}

}  // namespace cn::format
