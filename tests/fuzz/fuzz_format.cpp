// libFuzzer target over the LibTorch-free parsers: safetensors header, shard index, config.json (+ the
// Chronos-2 schema) and strict JSON. The first byte picks the parser. A cn::Error is the expected answer
// to bad input; anything else escaping (another exception, a crash, a sanitizer report) is a bug.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/common/status.h"
#include "core/format/json_strict.h"
#include "core/format/model_config.h"
#include "core/format/safetensors.h"
#include "core/format/shard_index.h"
#include "core/models/chronos2/chronos2_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t which = data[0] % 4;
    const uint8_t* body = data + 1;
    const size_t n = size - 1;
    const std::string_view text(reinterpret_cast<const char*>(body), n);
    try {
        switch (which) {
            case 0: {
                const auto h = cn::format::parse_safetensors(body, n, "fuzz");
                // Invariants the loader relies on.
                for (const auto& t : h.tensors) {
                    if (t.end < t.begin || h.data_offset + t.end > n) std::abort();
                }
                break;
            }
            case 1: (void)cn::format::parse_shard_index(text, "fuzz"); break;
            case 2: {
                const auto cfg = cn::format::ModelConfig::parse(text, "fuzz");
                if (cn::chronos2::is_chronos2(cfg)) (void)cn::chronos2::parse_chronos2_config(cfg);
                break;
            }
            case 3: (void)cn::format::parse_json_strict(text, "fuzz"); break;
        }
    } catch (const cn::Error&) {
        // the expected answer to bad input
    } catch (...) {
        std::abort();
    }
    return 0;
}
