// Streams of one's own for work that may run side by side on a device: a pipeline queues independent batches on
// different lanes, so the device overlaps one batch's memory-bound kernels and tails with another's.
//
//   StreamLanes lanes(device, 2);               // two streams on a CUDA device; none on the CPU
//   lanes.follow_current();                      // the lanes start after what the current stream holds
//   for (size_t k = 0; k < batches; ++k) {
//       const StreamLanes::Guard on_lane(&lanes, k);   // lane k % 2 is the current stream until destroyed
//       ... queue batch k (and the copy of its results, which waits for the current stream) ...
//   }
// The streams are created for this object alone (not ATen's shared pool, whose streams other code also queues on)
// and do not synchronise with the legacy default stream; the destructor waits for them and destroys them.
#pragma once

#include <optional>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>

namespace cn {

class StreamLanes {
public:
    // `n` streams on `device` when it is a CUDA device (CUDA builds); none otherwise, and a Guard changes nothing.
    StreamLanes(c10::Device device, int n);
    ~StreamLanes();
    StreamLanes(const StreamLanes&) = delete;
    StreamLanes& operator=(const StreamLanes&) = delete;

    // The number of streams (0 without CUDA).
    int size() const { return static_cast<int>(streams_.size()); }
    // Lane i % size()'s stream (size() > 0).
    c10::Stream stream(size_t i) const { return streams_[i % streams_.size()]; }

    // Makes every lane wait for the work queued so far on its device's current stream (the caller's: weights
    // prepared there, inputs copied there), as work queued on that stream afterwards would.
    void follow_current() const;

    // Makes lane i % size() of `lanes` the current stream of its device for the guard's life; nothing when `lanes`
    // is null or has no streams.
    class Guard {
    public:
        Guard(const StreamLanes* lanes, size_t i) {
            if (lanes && !lanes->streams_.empty()) guard_.emplace(lanes->streams_[i % lanes->streams_.size()]);
        }

    private:
        std::optional<c10::StreamGuard> guard_;
    };

private:
    std::vector<c10::Stream> streams_;
};

}  // namespace cn
