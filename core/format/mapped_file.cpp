#include "core/format/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common/status.h"

namespace cn::format {
namespace {

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// Opens a regular file for reading; returns its descriptor and size.
Fd open_regular(int dir_fd, const std::string& name, const std::string& label, size_t* size) {
    Fd f;
    f.fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) {
        const int e = errno;
        if (e == ENOENT || e == ENOTDIR) fail(Status::kNotFound, label + ": no such file");
        fail(Status::kInternal, label + ": cannot open: " + std::strerror(e));
    }
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) fail(Status::kInternal, label + ": cannot stat: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(Status::kModelFormat, label + ": not a regular file");
    *size = static_cast<size_t>(st.st_size);
    return f;
}

}  // namespace

MappedFile MappedFile::open_at(int dir_fd, const std::string& name, const std::string& label) {
    size_t size = 0;
    Fd f = open_regular(dir_fd, name, label, &size);
    MappedFile m;
    m.label_ = label;
    m.size_ = size;
    if (size == 0) return m;  // nothing to map; parsers reject it with a clear message
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (p == MAP_FAILED) fail(Status::kInternal, label + ": mmap failed: " + std::strerror(errno));
    m.data_ = static_cast<const uint8_t*>(p);
    // Re-check the size after mapping: a file shrunk in between would fault on access.
    struct stat st {};
    if (::fstat(f.fd, &st) != 0 || static_cast<size_t>(st.st_size) != size) {
        fail(Status::kModelFormat, label + ": file changed size while being opened");
    }
    return m;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), label_(std::move(other.label_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        label_ = std::move(other.label_);
    }
    return *this;
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

std::string read_small_file_at(int dir_fd, const std::string& name, const std::string& label, size_t max_bytes) {
    size_t size = 0;
    Fd f = open_regular(dir_fd, name, label, &size);
    if (size > max_bytes) {
        fail(Status::kModelFormat,
             label + ": file of " + std::to_string(size) + " bytes exceeds the limit of " + std::to_string(max_bytes));
    }
    std::string text(size, '\0');
    size_t got = 0;
    while (got < size) {
        const ssize_t n = ::read(f.fd, text.data() + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail(Status::kInternal, label + ": read failed");
        got += static_cast<size_t>(n);
    }
    return text;
}

}  // namespace cn::format
