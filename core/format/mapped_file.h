// A read-only, private memory mapping of a regular file. LibTorch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cn::format {

class MappedFile {
public:
    // Opens `name` relative to the directory descriptor `dir_fd` (or an absolute/relative path with
    // AT_FDCWD) and maps it. Throws cn::Error: kNotFound when missing, kModelFormat when not a regular
    // file, kInternal for other I/O errors. `label` names the file in messages.
    static MappedFile open_at(int dir_fd, const std::string& name, const std::string& label);

    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& label() const { return label_; }

private:
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    std::string label_;
};

// Reads a whole (small) file relative to `dir_fd` into a string, refusing files over `max_bytes`.
// Throws like MappedFile::open_at, and kModelFormat when the file is too large.
std::string read_small_file_at(int dir_fd, const std::string& name, const std::string& label, size_t max_bytes);

}  // namespace cn::format
