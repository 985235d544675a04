// The state behind a cn_run_options: cancel flag, deadline, seed, progress. LibTorch-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "core/common/status.h"

namespace cn {

class RunContext {
public:
    // Options set by the caller between calls.
    int64_t timeout_ms = 0;  // 0 = none
    uint64_t seed = 0;

    // Called by the library at the start of a call: arms the deadline and zeroes progress.
    void begin() {
        done_.store(0);
        total_.store(0);
        has_deadline_ = timeout_ms > 0;
        if (has_deadline_) deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    }
    // Polled between batches / steps. Throws kCancelled or kDeadlineExceeded.
    void check() const {
        if (cancel_.load(std::memory_order_relaxed)) fail(Status::kCancelled, "cancelled by the caller");
        if (has_deadline_ && std::chrono::steady_clock::now() >= deadline_) {
            fail(Status::kDeadlineExceeded, "deadline of " + std::to_string(timeout_ms) + " ms exceeded");
        }
    }
    void cancel() { cancel_.store(true); }
    void reset() {
        cancel_.store(false);
        done_.store(0);
        total_.store(0);
    }
    void set_total(uint64_t n) { total_.store(n); }
    void advance(uint64_t n = 1) { done_.fetch_add(n); }
    uint64_t done() const { return done_.load(); }
    uint64_t total() const { return total_.load(); }

private:
    std::atomic<bool> cancel_{false};
    std::atomic<uint64_t> done_{0};
    std::atomic<uint64_t> total_{0};
    bool has_deadline_ = false;
    std::chrono::steady_clock::time_point deadline_{};
};

}  // namespace cn
