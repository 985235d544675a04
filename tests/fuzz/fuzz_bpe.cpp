// libFuzzer target over the Qwen2 byte-level BPE tokenizer (core/tokenizers/bpe.h) and its text layer
// (bpe_unicode.h). The first byte picks what runs on the rest:
//   0  encode with the tiny tokenizer (tests/fixtures/qwen_tokenizer/tiny_tokenizer.json: normalized and
//      overlapping added tokens, a byte missing from the vocabulary)
//   1  encode with the real Qwen3 tokenizer when $CN_QWEN_TOKENIZER_DIR names it, else the tiny one
//   2  NFC and the pre-tokenizer split directly, with their invariants
//   3  load the bytes as a tokenizer.json
// A cn::Error is the expected answer to bad input (invalid UTF-8 for encode, anything for the loader); any other
// exception, a broken invariant, a crash or a sanitizer report is a bug.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"
#include "core/tokenizers/bpe.h"
#include "core/tokenizers/bpe_unicode.h"

namespace {

namespace bu = cn::text::bpe_unicode;
using cn::text::Qwen2Tokenizer;

const Qwen2Tokenizer& tiny() {
    static const Qwen2Tokenizer t = Qwen2Tokenizer::from_file(std::string(CN_FIXTURES_DIR) + "/qwen_tokenizer/tiny_tokenizer.json");
    return t;
}

const Qwen2Tokenizer& real() {
    static const Qwen2Tokenizer* t = [] {
        const char* d = std::getenv("CN_QWEN_TOKENIZER_DIR");
        if (!d || !*d) return &tiny();
        try {
            return static_cast<const Qwen2Tokenizer*>(new Qwen2Tokenizer(Qwen2Tokenizer::from_directory(d)));
        } catch (const cn::Error&) {
            return &tiny();
        }
    }();
    return *t;
}

void check(bool ok) {
    if (!ok) std::abort();
}

void encode(const Qwen2Tokenizer& t, std::string_view text) {
    size_t bad = 0;
    const char* why = nullptr;
    const bool valid = cn::text::check_utf8(text, bad, why);
    try {
        const std::vector<int32_t> ids = t.encode(text);
        check(valid);
        for (int32_t id : ids) check(id >= 0 && static_cast<size_t>(id) < t.vocab_size());
        check(t.encode(text) == ids);  // no state carried between calls
    } catch (const cn::Error& e) {
        check(!valid && e.status() == cn::Status::kInvalidArgument);
        check(e.message().find("byte offset " + std::to_string(bad)) != std::string::npos);
    }
}

// NFC is idempotent and keeps valid UTF-8; the pre-tokenizer's pieces are non-empty, end on char boundaries and
// tile the text.
void text_layer(std::string_view text) {
    size_t bad = 0;
    const char* why = nullptr;
    if (!cn::text::check_utf8(text, bad, why)) return;
    std::string once, twice;
    std::vector<uint32_t> scratch;
    const std::string_view norm = bu::nfc(text, once, scratch) ? std::string_view(once) : text;
    check(cn::text::check_utf8(norm, bad, why));
    check(!bu::nfc(norm, twice, scratch) || twice == norm);
    for (size_t pos = 0; pos < norm.size();) {
        const size_t end = bu::pretoken_end(norm, pos);
        check(end > pos && end <= norm.size());
        check(end == norm.size() || (static_cast<unsigned char>(norm[end]) & 0xC0) != 0x80);
        pos = end;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        switch (data[0] % 4) {
            case 0: encode(tiny(), text); break;
            case 1: encode(real(), text); break;
            case 2: text_layer(text); break;
            case 3: {
                const Qwen2Tokenizer t = Qwen2Tokenizer::from_json_text(text, "fuzz");
                encode(t, "a<|im_end|>b \xC3\xA9 e\xCC\x81 'S 123");
                break;
            }
        }
    } catch (const cn::Error& e) {
        check(data[0] % 4 == 3 && e.status() == cn::Status::kModelFormat);  // only the loader refuses input
    } catch (...) {
        std::abort();
    }
    return 0;
}
