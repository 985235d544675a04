// core/common/numpy_sum.h against numpy itself: the float32 mean and std of columns built the way Kronos'
// reference builds its array, and the sample-path average, bit for bit (tests/fixtures/kronos/numpy_sums.json,
// scripts/make_numpy_sum_fixture.py). Columns: a random walk, constants at six magnitudes, near-constant,
// alternating signs, values of order 1e-30 and 1e18, at lengths 1-40, around 64, 128, 256, 512 and up to 20,000.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/numpy_sum.h"

#ifndef CN_FIXTURES_DIR
#error "CN_FIXTURES_DIR must point at tests/fixtures"
#endif

namespace {

const double kConstants[] = {97.3, 0.1, 3.3333, 1e4, 1e-3, 0.0};

// The fixture script's column(): a 64-bit LCG and float64 arithmetic rounded once to float32.
std::vector<float> column(const std::string& kind, int64_t n, uint64_t seed) {
    uint64_t state = seed;
    const float c = static_cast<float>(kConstants[(seed / 6) % 6]);
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const double u = static_cast<double>(state >> 40) / 16777216.0;
        double v;
        if (kind == "walk")
            v = 97.3 + (u - 0.5);
        else if (kind == "constant")
            v = c;
        else if (kind == "near_constant")
            v = i % 3 == 0 ? std::nextafter(c, std::numeric_limits<float>::infinity()) : c;
        else if (kind == "alternating")
            v = i % 2 == 0 ? 42.5 : -42.5;
        else if (kind == "tiny")
            v = 1e-30 * (u + 0.5);
        else
            v = 1e18 * (u + 0.5);
        out[static_cast<size_t>(i)] = static_cast<float>(v);
    }
    return out;
}

uint32_t bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
}

TEST(NumpySum, MeanStdAndPathMeanEqualNumpyBitForBit) {
    std::ifstream f(std::string(CN_FIXTURES_DIR) + "/kronos/numpy_sums.json");
    ASSERT_TRUE(f.good());
    const auto doc = nlohmann::json::parse(f);
    size_t checked = 0, tiny_std = 0;
    for (const auto& c : doc["columns"]) {
        const std::string kind = c["kind"];
        const int64_t n = c["n"];
        const auto col = column(kind, n, c["seed"].get<uint64_t>());
        // A column of a [n, 6] row-major array: stride 6, as kronos_model.cpp lays out the history.
        std::vector<float> x(static_cast<size_t>(n) * 6, std::numeric_limits<float>::quiet_NaN());
        for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i) * 6 + 2] = col[static_cast<size_t>(i)];
        float mean, stdv;
        cn::numpy::column_mean_std(x.data() + 2, n, 6, mean, stdv);
        const std::string what = kind + " n=" + std::to_string(n);
        ASSERT_EQ(bits(mean), c["mean"].get<uint32_t>()) << what << " mean " << mean;
        ASSERT_EQ(bits(stdv), c["std"].get<uint32_t>()) << what << " std " << stdv;
        const int64_t S = std::min<int64_t>(n, 64);
        const float pm = cn::numpy::sequential_mean(col.data(), S, 1);
        ASSERT_EQ(bits(pm), c["path_mean"].get<uint32_t>()) << what << " path mean " << pm;
        tiny_std += kind == "constant" && stdv > 0.f;
        ++checked;
    }
    EXPECT_EQ(checked, doc["columns"].size());
    EXPECT_GT(checked, 300u);
    EXPECT_GT(tiny_std, 0u) << "no constant column whose numpy std is non-zero: the fixture lost its point";
}

}  // namespace
