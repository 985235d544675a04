#include "core/tokenizers/utf8.h"

#include <cstring>

namespace cn::text {

bool check_utf8(std::string_view s, size_t& bad, const char*& why) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        while (i + 8 <= n) {  // ASCII eight bytes at a time
            uint64_t w;
            std::memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        const unsigned char b = p[i];
        if (b < 0x80) {
            ++i;
            continue;
        }
        size_t len;
        unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
        if (b < 0xC0) {
            bad = i, why = "unexpected continuation byte";
            return false;
        } else if (b < 0xC2) {
            bad = i, why = "overlong 2-byte sequence";
            return false;
        } else if (b < 0xE0) {
            len = 2;
        } else if (b < 0xF0) {
            len = 3;
            if (b == 0xE0) lo = 0xA0;
            if (b == 0xED) hi = 0x9F;
        } else if (b < 0xF5) {
            len = 4;
            if (b == 0xF0) lo = 0x90;
            if (b == 0xF4) hi = 0x8F;
        } else {
            bad = i, why = b < 0xF8 ? "code point above U+10FFFF" : "byte that never occurs in UTF-8 (0xF8..0xFF)";
            return false;
        }
        for (size_t k = 1; k < len; ++k) {
            if (i + k >= n || !is_utf8_continuation(p[i + k])) {
                bad = i;
                why = len == 2 ? "truncated 2-byte sequence" : len == 3 ? "truncated 3-byte sequence" : "truncated 4-byte sequence";
                return false;
            }
        }
        if (p[i + 1] < lo || p[i + 1] > hi) {
            bad = i;
            why = b == 0xE0   ? "overlong 3-byte sequence"
                  : b == 0xF0 ? "overlong 4-byte sequence"
                  : b == 0xED ? "UTF-16 surrogate (U+D800..U+DFFF) encoded in UTF-8"
                              : "code point above U+10FFFF";
            return false;
        }
        i += len;
    }
    return true;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        const char b[2] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
        out.append(b, 2);
    } else if (cp < 0x10000) {
        const char b[3] = {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                           static_cast<char>(0x80 | (cp & 0x3F))};
        out.append(b, 3);
    } else {
        const char b[4] = {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
                           static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
        out.append(b, 4);
    }
}

}  // namespace cn::text
