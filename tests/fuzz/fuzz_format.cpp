// libFuzzer target over the LibTorch-free parsers: safetensors header, shard index, config.json (+ the
// Chronos-2 schema), strict JSON, the WordPiece tokenizer (encoding arbitrary bytes with a small fixed
// vocabulary) and its vocabulary loader. The first byte picks the parser. A cn::Error is the expected answer
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
#include "core/tokenizers/wordpiece.h"

namespace {

// A small vocabulary with the special tokens, a few words and ## pieces, CJK and accented entries.
const cn::text::WordPieceTokenizer& tokenizer() {
    static const cn::text::WordPieceTokenizer t = [] {
        cn::text::WordPieceOptions o;
        o.max_length = 64;
        return cn::text::WordPieceTokenizer::from_vocab_text(
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\nthe\nknight\n##s\n##ing\nshin\n.\n,\n!\n\u4e2d\n\u6587\ne\n##e\n", o,
            "fuzz-vocab");
    }();
    return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t which = data[0] % 6;
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
            case 4: {
                const auto& t = tokenizer();
                const auto e = t.encode(text, 2 + n % 70);
                if (e.ok()) {
                    if (e.ids.size() < 2 || e.ids.size() > 2 + n % 70 || e.ids.front() != t.cls_id() || e.ids.back() != t.sep_id()) {
                        std::abort();
                    }
                    for (int32_t id : e.ids) {
                        if (id < 0 || static_cast<size_t>(id) >= t.vocab_size()) std::abort();
                    }
                } else if (!e.ids.empty() || e.message.empty()) {
                    std::abort();
                }
                break;
            }
            case 5: (void)cn::text::WordPieceTokenizer::from_vocab_text(text, cn::text::WordPieceOptions{}, "fuzz"); break;
        }
    } catch (const cn::Error&) {
        // the expected answer to bad input
    } catch (...) {
        std::abort();
    }
    return 0;
}
