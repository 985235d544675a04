#include "core/models/chronos2/chronos2_covariates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace cn::chronos2 {
namespace {

// Sorted distinct real labels (code-point order, as pandas sorts string categories) -> code.
std::map<std::string, size_t> categories(const Labels& past) {
    std::map<std::string, size_t> cats;
    for (const auto& l : past) {
        if (l) cats.emplace(*l, 0);
    }
    size_t i = 0;
    for (auto& [name, code] : cats) code = i++;
    return cats;
}

}  // namespace

EncodedCovariate target_encode(const Labels& past, const Labels& future, const float* target) {
    const auto cats = categories(past);
    const size_t nan_slot = cats.size();
    const size_t n_slots = cats.size() + 2;  // real categories, the missing-label slot, the unseen slot
    const size_t unseen = cats.size() + 1;
    auto code_of = [&](const std::optional<std::string>& l) -> size_t {
        if (!l) return nan_slot;
        auto it = cats.find(*l);
        return it == cats.end() ? unseen : it->second;
    };
    double item_sum = 0.0, item_count = 0.0;
    std::vector<double> sums(n_slots, 0.0), counts(n_slots, 0.0);
    for (size_t i = 0; i < past.size(); ++i) {
        const float t = target[i];
        const bool ok = std::isfinite(t);
        const double v = ok ? static_cast<double>(t) : 0.0;
        item_sum += v;
        item_count += ok ? 1.0 : 0.0;
        const size_t c = code_of(past[i]);
        sums[c] += v;
        counts[c] += ok ? 1.0 : 0.0;
    }
    const double item_mean = item_count > 0 ? item_sum / item_count : 0.0;
    auto lookup = [&](size_t c) { return static_cast<float>((1.0 * item_mean + sums[c]) / (1.0 + counts[c])); };
    EncodedCovariate e;
    e.past.reserve(past.size());
    for (const auto& l : past) e.past.push_back(lookup(code_of(l)));
    for (const auto& l : future) e.future.push_back(lookup(code_of(l)));
    return e;
}

EncodedCovariate ordinal_encode(const Labels& past, const Labels& future, const std::vector<std::string>& categories) {
    auto code = [&](const std::string& l) -> std::optional<size_t> {
        auto it = std::lower_bound(categories.begin(), categories.end(), l);
        if (it == categories.end() || *it != l) return std::nullopt;
        return static_cast<size_t>(it - categories.begin());
    };
    const float nan_code = static_cast<float>(categories.size());
    EncodedCovariate e;
    for (const auto& l : past) {
        const auto c = l ? code(*l) : std::nullopt;
        e.past.push_back(c ? static_cast<float>(*c) : nan_code);
    }
    for (const auto& l : future) {
        if (!l) {
            e.future.push_back(nan_code);
            continue;
        }
        const auto c = code(*l);
        e.future.push_back(c ? static_cast<float>(*c) : std::numeric_limits<float>::quiet_NaN());
    }
    return e;
}

void collect_categories(const Labels& past, std::vector<std::string>& categories) {
    for (const auto& l : past) {
        if (!l) continue;
        auto it = std::lower_bound(categories.begin(), categories.end(), *l);
        if (it == categories.end() || *it != *l) categories.insert(it, *l);
    }
}

}  // namespace cn::chronos2
