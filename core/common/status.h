// Internal status and error type of the core. Mirrors cn_status (capi/include/cutenative.h) value for
// value; LibTorch-free so file-format readers and tokenizers can use it.
#pragma once

#include <exception>
#include <string>
#include <utility>

namespace cn {

enum class Status : int {
    kOk = 0,
    kInvalidArgument = 1,
    kNotFound = 2,
    kUnsupported = 3,
    kModelFormat = 4,
    kOutOfHostMemory = 5,
    kOutOfDeviceMemory = 6,
    kCancelled = 7,
    kDeadlineExceeded = 8,
    kBusy = 9,
    kInternal = 10,
};

// The one exception type the core throws on purpose. The C ABI glue turns it (and every other exception)
// into a status plus message; nothing crosses the ABI.
class Error : public std::exception {
public:
    Error(Status status, std::string message) : status_(status), message_(std::move(message)) {}
    Status status() const noexcept { return status_; }
    const char* what() const noexcept override { return message_.c_str(); }
    const std::string& message() const noexcept { return message_; }

private:
    Status status_;
    std::string message_;
};

[[noreturn]] inline void fail(Status status, std::string message) { throw Error(status, std::move(message)); }

}  // namespace cn
