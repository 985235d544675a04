// safetensors header parsing and validation over a memory span. LibTorch-free; shared by the loader and
// the fuzz target. The on-disk rules we enforce (docs/formats.md has the one-screen version):
//   [u64 little-endian N][N bytes of JSON header, starting with '{', may end in spaces][data region]
//   - 8 + N <= file size, N <= 100,000,000;
//   - strict JSON (no duplicate keys); "__metadata__" optional, a string -> string object;
//   - every other key is a tensor: {"dtype": allowlisted, "shape": [dims], "data_offsets": [begin, end]}
//     and nothing else; rank <= 8; each dim an integer in [0, 2^40];
//   - end - begin == nelements * dtype size (checked arithmetic);
//   - offsets relative to the data region, sorted they start at 0, are contiguous (no holes, no overlaps)
//     and the last one ends exactly at the end of the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cn::format {

enum class DType : int {
    kBool,
    kU8,
    kI8,
    kI16,
    kU16,
    kF16,
    kBF16,
    kI32,
    kU32,
    kF32,
    kF64,
    kI64,
    kU64,
    kF8E4M3,
    kF8E5M2
};

// Bytes per element.
size_t dtype_size(DType t);
// The safetensors spelling ("F32", "BF16", ...).
const char* dtype_name(DType t);

struct TensorEntry {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // offsets relative to the data region
    uint64_t end = 0;
    uint64_t numel = 0;
    uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
    uint64_t header_bytes = 0;         // N
    uint64_t data_offset = 0;          // 8 + N: start of the data region in the file
    std::vector<TensorEntry> tensors;  // in file order (sorted by offset)
    std::map<std::string, std::string> metadata;
};

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
inline constexpr size_t kMaxRank = 8;
inline constexpr int64_t kMaxDim = int64_t{1} << 40;

// Validates the whole file image `data[0..size)` and returns its header. Throws cn::Error(kModelFormat)
// whose message starts with `label` and names the tensor at fault. Never reads outside the span.
SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, std::string_view label);

}  // namespace cn::format
