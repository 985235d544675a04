// UTF-8 validation, decoding and encoding shared by the tokenizers (WordPiece, Qwen2 BPE). LibTorch-free; pure
// functions, safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cn::text {

inline bool is_utf8_continuation(unsigned char b) noexcept { return (b & 0xC0) == 0x80; }

// Checks that `s` is well-formed UTF-8 (Unicode Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF).
// On failure returns false with the byte offset of the offending sequence and the reason.
bool check_utf8(std::string_view s, size_t& bad_offset, const char*& why) noexcept;

// Decodes the sequence at p[i] of text that check_utf8 accepted, advancing i.
inline uint32_t decode_utf8(const unsigned char* p, size_t& i) noexcept {
    const unsigned char b = p[i];
    if (b < 0x80) return p[i++];
    if (b < 0xE0) {
        const uint32_t cp = (uint32_t(b & 0x1F) << 6) | (p[i + 1] & 0x3F);
        i += 2;
        return cp;
    }
    if (b < 0xF0) {
        const uint32_t cp = (uint32_t(b & 0x0F) << 12) | (uint32_t(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
        i += 3;
        return cp;
    }
    const uint32_t cp =
        (uint32_t(b & 0x07) << 18) | (uint32_t(p[i + 1] & 0x3F) << 12) | (uint32_t(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
    i += 4;
    return cp;
}

// Appends the UTF-8 encoding of code point `cp` (<= U+10FFFF).
void append_utf8(std::string& out, uint32_t cp);

}  // namespace cn::text
