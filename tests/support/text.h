// Test helpers for tokenizer tests: printable forms of texts for failure messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>

namespace cn::test {

// Printable form of a text: ASCII as is, everything else as \u{...} / \xNN.
inline std::string escaped(const std::string& s, size_t max_chars) {
    std::ostringstream o;
    size_t i = 0, shown = 0;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    while (i < s.size() && shown < max_chars) {
        const unsigned char b = p[i];
        char buf[16];
        if (b >= 0x20 && b < 0x7F) {
            o << static_cast<char>(b);
            ++i;
        } else if (b < 0x80) {
            std::snprintf(buf, sizeof buf, "\\x%02X", b);
            o << buf;
            ++i;
        } else {
            const int len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
            uint32_t cp = b & (0x3F >> (len - 1));
            for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
            std::snprintf(buf, sizeof buf, "\\u{%X}", cp);
            o << buf;
            i += len;
        }
        ++shown;
    }
    if (i < s.size()) o << "... (" << s.size() << " bytes)";
    return o.str();
}

}  // namespace cn::test
