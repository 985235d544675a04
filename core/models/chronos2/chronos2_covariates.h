// Categorical covariates encoded as chronos-forecasting 2.3 does (preprocess.py): per-task smoothed
// target encoding when the task has a single target, ordinal codes otherwise. LibTorch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cn::chronos2 {

using Labels = std::vector<std::optional<std::string>>;

struct EncodedCovariate {
    std::vector<float> past;    // same length as the past labels
    std::vector<float> future;  // same length as the future labels
};

// Target encoding (single target): each (category) of the task gets
//   (1 * mean(target) + sum(target where category)) / (1 + count(target where category)),
// sums and counts over finite target values, in float64, rounded to float32. A missing label is a
// category of its own; a future label never seen in the past gets the task's target mean. `target`: the series' values,
// past.size() of them.
EncodedCovariate target_encode(const Labels& past, const Labels& future, const float* target);

// Ordinal codes (several targets): index of the label in `categories` (sorted distinct labels; the
// reference takes them over the same covariate of every task in the call); a missing label gets the code
// after the last real one; a future label not among the categories becomes NaN.
EncodedCovariate ordinal_encode(const Labels& past, const Labels& future, const std::vector<std::string>& categories);

// Adds the distinct labels of `past` to the sorted set `categories`.
void collect_categories(const Labels& past, std::vector<std::string>& categories);

}  // namespace cn::chronos2
