// The Kronos fixture cases (tests/fixtures/kronos/cases.json, scripts/make_kronos_fixtures.py) as core requests:
// one OHLC[V[A]] group per series entry, timestamps on its first channel, the case's sampling parameters.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/runtime/requests.h"

namespace cn::test {

inline nlohmann::json kronos_cases() {
    std::ifstream f(std::string(CN_FIXTURES_DIR) + "/kronos/cases.json");
    return nlohmann::json::parse(f)["cases"];
}

inline ForecastRequest kronos_request(const nlohmann::json& c) {
    ForecastRequest req;
    int64_t group = 0;
    for (const auto& s : c["series"]) {
        bool first = true;
        for (const auto& ch : s["values"]) {
            ForecastSeries fs;
            fs.values = SeriesValues(ch.get<std::vector<float>>());
            fs.group = group;
            if (first) {
                fs.timestamps = s["history_ts"].get<std::vector<int64_t>>();
                fs.future_timestamps = s["future_ts"].get<std::vector<int64_t>>();
                first = false;
            }
            req.series.push_back(std::move(fs));
        }
        ++group;
    }
    req.horizon = c["pred_len"];
    req.temperature = c["temperature"];
    req.top_k = c["top_k"];
    req.top_p = c["top_p"];
    req.sample_count = c["sample_count"];
    return req;
}

}  // namespace cn::test
