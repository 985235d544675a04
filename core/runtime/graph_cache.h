// LRU caches of captured CUDA graphs, the bookkeeping every model's graph mode shares: keyed entries captured on
// first use, the device bytes each capture kept (the allocator's reserved bytes before and after it), eviction
// of the least recently used entry beyond a limit, a lock-free total for info calls, and one mutex per model
// that serialises the calls replaying them. CUDA-free (the bytes come from a meter the model passes, e.g.
// [device] { return reserved_bytes(device); } with core/runtime/cuda_graph.h), so its logic is tested on CPU.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "core/common/status.h"

namespace cn {

template <class Key, class Entry>
class LruGraphCache;

// What one model's graph caches share (a cache and the caches nested in its entries): the mutex that serialises
// the calls using them (captured graphs replay on static buffers, so no capture or replay may run while another
// call replays), the meter of device bytes, and the bytes all of them keep.
class GraphPool {
public:
    using Meter = std::function<int64_t()>;  // device bytes reserved now
    explicit GraphPool(Meter meter) : meter_(std::move(meter)) {}
    GraphPool(const GraphPool&) = delete;
    GraphPool& operator=(const GraphPool&) = delete;

    // The pool's mutex held for one call. The caches' lookups take it as proof that the caller holds it.
    class Lock {
    public:
        explicit Lock(const GraphPool& pool) : pool_(&pool), lock_(pool.mu_) {}

    private:
        friend class GraphPool;
        const GraphPool* pool_;
        std::unique_lock<std::mutex> lock_;
    };
    Lock lock() const { return Lock(*this); }

    // Device bytes the pool's graphs keep (their memory pools and static buffers); read without the lock.
    uint64_t bytes() const { return bytes_.load(); }

    // Fails with kInternal unless `lock` holds this pool's mutex.
    void check(const Lock& lock) const {
        if (lock.pool_ != this || !lock.lock_.owns_lock()) fail(Status::kInternal, "graph cache used without its pool's lock");
    }

private:
    template <class, class>
    friend class LruGraphCache;

    Meter meter_;
    mutable std::mutex mu_;
    std::atomic<uint64_t> bytes_{0};
};

// Entries of type Entry by Key, at most `max_entries` of them; each is made (allocated and captured) by the
// caller's factory on first use, and the bytes reserved meanwhile are its cost in the pool. Every lookup runs
// under the pool's lock.
template <class Key, class Entry>
class LruGraphCache {
public:
    LruGraphCache(GraphPool& pool, size_t max_entries) : pool_(pool), max_(max_entries) {}
    // Gives the bytes of its entries back to the pool (the entries' own nested caches give back theirs).
    ~LruGraphCache() { pool_.bytes_ -= bytes_; }
    LruGraphCache(const LruGraphCache&) = delete;
    LruGraphCache& operator=(const LruGraphCache&) = delete;

    // Whether `n` distinct keys are kept at once (a call needing them all evicts none of them while it runs).
    bool fits(size_t n) const { return n <= max_; }

    // The entry for `key`, marked used now; absent, `make()` (returning std::unique_ptr<Entry>) builds it after
    // the least recently used entry was evicted if the cache was full. A throwing `make` leaves nothing behind.
    template <class Make>
    Entry& get(const GraphPool::Lock& lock, const Key& key, Make&& make) {
        pool_.check(lock);
        if (auto it = entries_.find(key); it != entries_.end()) {
            it->second.last_used = ++tick_;
            return *it->second.entry;
        }
        evict_if_full();
        const int64_t before = pool_.meter_();
        Slot slot;
        slot.entry = make();
        slot.bytes = static_cast<uint64_t>(std::max<int64_t>(0, pool_.meter_() - before));
        slot.last_used = ++tick_;
        Slot& kept = entries_[key] = std::move(slot);  // kept first: a throwing insert must not leave its bytes counted
        bytes_ += kept.bytes;
        pool_.bytes_ += kept.bytes;
        return *kept.entry;
    }

    // The entry for `key` without marking it used, or null.
    Entry* find(const GraphPool::Lock& lock, const Key& key) const {
        pool_.check(lock);
        auto it = entries_.find(key);
        return it == entries_.end() ? nullptr : it->second.entry.get();
    }

    size_t size(const GraphPool::Lock& lock) const {
        pool_.check(lock);
        return entries_.size();
    }
    // Bytes of this cache's own entries (not of caches nested in them).
    uint64_t bytes(const GraphPool::Lock& lock) const {
        pool_.check(lock);
        return bytes_;
    }

private:
    struct Slot {
        std::unique_ptr<Entry> entry;
        uint64_t last_used = 0, bytes = 0;
    };

    void evict_if_full() {
        if (entries_.empty() || entries_.size() < max_) return;
        const auto victim = std::min_element(entries_.begin(), entries_.end(),
                                             [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
        bytes_ -= victim->second.bytes;
        pool_.bytes_ -= victim->second.bytes;
        entries_.erase(victim);
    }

    GraphPool& pool_;
    size_t max_;
    std::map<Key, Slot> entries_;
    uint64_t tick_ = 0;
    uint64_t bytes_ = 0;
};

}  // namespace cn
