// The LRU graph cache's bookkeeping (core/runtime/graph_cache.h), CUDA-free: entries made once per key, the bytes
// a make reserved charged to the pool, least-recently-used eviction, nested caches' bytes, the lock as proof.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/common/status.h"
#include "core/runtime/graph_cache.h"

namespace {

// A fake device: makes reserve bytes, nothing is ever given back (as LibTorch's caching allocator keeps them).
struct FakeDevice {
    int64_t reserved = 0;
    int makes = 0;
};

struct Leaf {
    std::string name;
};

struct Outer {
    explicit Outer(cn::GraphPool& pool) : inner(pool, 2) {}
    cn::LruGraphCache<int, Leaf> inner;
};

// make() of an entry costing `bytes` on `dev`.
auto leaf(FakeDevice& dev, std::string name, int64_t bytes) {
    return [&dev, name = std::move(name), bytes] {
        dev.reserved += bytes;
        ++dev.makes;
        return std::make_unique<Leaf>(Leaf{name});
    };
}

}  // namespace

TEST(GraphCache, MakesOncePerKeyAndChargesTheReservedBytes) {
    FakeDevice dev;
    cn::GraphPool pool([&] { return dev.reserved; });
    cn::LruGraphCache<int, Leaf> cache(pool, 4);
    const auto lock = pool.lock();
    Leaf& a = cache.get(lock, 1, leaf(dev, "a", 100));
    EXPECT_EQ(&cache.get(lock, 1, leaf(dev, "again", 1)), &a);  // a hit makes nothing
    cache.get(lock, 2, leaf(dev, "b", 30));
    EXPECT_EQ(dev.makes, 2);
    EXPECT_EQ(pool.bytes(), 130u);  // read without the lock (held here)
    EXPECT_EQ(cache.bytes(lock), 130u);
    EXPECT_EQ(cache.size(lock), 2u);
    EXPECT_EQ(cache.find(lock, 3), nullptr);
    EXPECT_EQ(cache.find(lock, 2)->name, "b");
    EXPECT_TRUE(cache.fits(4));
    EXPECT_FALSE(cache.fits(5));
}

TEST(GraphCache, EvictsTheLeastRecentlyUsedEntryBeyondTheLimit) {
    FakeDevice dev;
    cn::GraphPool pool([&] { return dev.reserved; });
    cn::LruGraphCache<int, Leaf> cache(pool, 2);
    const auto lock = pool.lock();
    cache.get(lock, 1, leaf(dev, "a", 10));
    cache.get(lock, 2, leaf(dev, "b", 20));
    cache.get(lock, 1, leaf(dev, "a2", 1));  // a used again: b is now the least recent
    cache.get(lock, 3, leaf(dev, "c", 40));
    EXPECT_EQ(cache.size(lock), 2u);
    EXPECT_EQ(cache.find(lock, 2), nullptr);
    EXPECT_EQ(cache.find(lock, 1)->name, "a");
    EXPECT_EQ(pool.bytes(), 50u);
    // find does not mark an entry used: a (used before c) goes next.
    cache.find(lock, 1);
    cache.get(lock, 4, leaf(dev, "d", 5));
    EXPECT_EQ(cache.find(lock, 1), nullptr);
    EXPECT_NE(cache.find(lock, 3), nullptr);
    EXPECT_EQ(pool.bytes(), 45u);
}

TEST(GraphCache, NestedCachesShareThePoolAndGiveTheirBytesBack) {
    FakeDevice dev;
    cn::GraphPool pool([&] { return dev.reserved; });
    {
        cn::LruGraphCache<int, Outer> outer(pool, 1);
        const auto lock = pool.lock();
        Outer& o = outer.get(lock, 1, [&] {
            dev.reserved += 100;
            return std::make_unique<Outer>(pool);
        });
        o.inner.get(lock, 7, leaf(dev, "x", 10));
        o.inner.get(lock, 8, leaf(dev, "y", 20));
        o.inner.get(lock, 9, leaf(dev, "z", 40));  // evicts x (inner limit 2)
        EXPECT_EQ(o.inner.bytes(lock), 60u);
        EXPECT_EQ(outer.bytes(lock), 100u);
        EXPECT_EQ(pool.bytes(), 160u);
        // A second outer entry evicts the first, with everything nested in it.
        outer.get(lock, 2, [&] {
            dev.reserved += 5;
            return std::make_unique<Outer>(pool);
        });
        EXPECT_EQ(pool.bytes(), 5u);
    }
    EXPECT_EQ(pool.bytes(), 0u);  // destroyed caches give back what they held
}

TEST(GraphCache, AFailedMakeLeavesNothing) {
    FakeDevice dev;
    cn::GraphPool pool([&] { return dev.reserved; });
    cn::LruGraphCache<int, Leaf> cache(pool, 2);
    const auto lock = pool.lock();
    EXPECT_THROW(cache.get(lock, 1,
                           [&]() -> std::unique_ptr<Leaf> {
                               dev.reserved += 50;
                               throw std::runtime_error("capture failed");
                           }),
                 std::runtime_error);
    EXPECT_EQ(cache.size(lock), 0u);
    EXPECT_EQ(pool.bytes(), 0u);
    EXPECT_EQ(cache.get(lock, 1, leaf(dev, "a", 7)).name, "a");
    EXPECT_EQ(pool.bytes(), 7u);
}

TEST(GraphCache, LookupsNeedTheirPoolsLock) {
    FakeDevice dev;
    cn::GraphPool pool([&] { return dev.reserved; }), other([] { return int64_t{0}; });
    cn::LruGraphCache<int, Leaf> cache(pool, 2);
    const auto wrong = other.lock();
    try {
        cache.get(wrong, 1, leaf(dev, "a", 1));
        FAIL() << "a lookup under another pool's lock was accepted";
    } catch (const cn::Error& e) {
        EXPECT_EQ(e.status(), cn::Status::kInternal);
    }
    EXPECT_EQ(dev.makes, 0);
}
