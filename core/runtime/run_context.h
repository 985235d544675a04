// The state behind a cn_run_options: cancel flag, deadline, seed, progress. LibTorch-free.
#pragma once

#include <array>
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

    // Where a call's time went (cn_call_timings), in milliseconds; read after the call returned. A model marks the end
    // of each phase it has; the time since the previous mark (or the call's start) goes to that phase.
    enum Phase : int {
        kPrepare,
        kAdapters,
        kText,
        kDenoise,
        kDecode,
        kPhases
    };

    // Called by the library at the start of a call: arms the deadline and zeroes progress and timings.
    void begin() {
        done_.store(0);
        total_.store(0);
        phase_ms_.fill(0.0);
        start_ = last_mark_ = std::chrono::steady_clock::now();
        total_ms_ = 0.0;
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
    // Ends `p` now (a device model synchronises its stream first, so the phase holds its device time).
    void mark(Phase p) {
        const auto now = std::chrono::steady_clock::now();
        phase_ms_[static_cast<size_t>(p)] += std::chrono::duration<double, std::milli>(now - last_mark_).count();
        last_mark_ = now;
    }
    // Called by the library when the call ends (also on failure).
    void finish() { total_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count(); }
    double phase_ms(Phase p) const { return phase_ms_[static_cast<size_t>(p)]; }
    double total_ms() const { return total_ms_; }
    void reset() {
        cancel_.store(false);
        done_.store(0);
        total_.store(0);
        phase_ms_.fill(0.0);
        total_ms_ = 0.0;
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
    std::chrono::steady_clock::time_point start_{}, last_mark_{};
    std::array<double, kPhases> phase_ms_{};
    double total_ms_ = 0.0;
};

}  // namespace cn
