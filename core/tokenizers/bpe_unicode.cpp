// UTF-8, NFC and the Qwen2 pre-tokenizer regex: see bpe_unicode.h. LibTorch-free.
#include "core/tokenizers/bpe_unicode.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace cn::text::bpe_unicode {

const char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kSCount = kLCount * kVCount * kTCount;

uint8_t category_slow(uint32_t cp) noexcept {
    // The last range whose start <= cp (the first range starts at 0).
    size_t lo = 0, hi = kCategoryCount;
    while (hi - lo > 1) {
        const size_t mid = (lo + hi) / 2;
        if ((kCategoryRanges[mid] >> 8) <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return static_cast<uint8_t>(kCategoryRanges[lo] & 0xFF);
}

// The BMP as a direct table (64 KiB, built once, thread-safe static initialization).
const std::array<uint8_t, 0x10000>& bmp_table() {
    static const auto* table = [] {
        auto* t = new std::array<uint8_t, 0x10000>();
        for (uint32_t cp = 0; cp < 0x10000; ++cp) (*t)[cp] = category_slow(cp);
        return t;
    }();
    return *table;
}

uint8_t ccc_of(uint32_t cp) noexcept {
    size_t lo = 0, hi = kNfcCccCount;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (kNfcCcc[mid].hi < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < kNfcCccCount && kNfcCcc[lo].lo <= cp ? kNfcCcc[lo].ccc : 0;
}

// Composite of (a, b), or 0 when the pair does not compose.
uint32_t compose_pair(uint32_t a, uint32_t b) noexcept {
    if (a - kLBase < kLCount && b - kVBase < kVCount) return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    if (a - kSBase < kSCount && (a - kSBase) % kTCount == 0 && b - kTBase - 1 < kTCount - 1) return a + (b - kTBase);
    size_t lo = 0, hi = kNfcComposeCount;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        const NfcComposition& c = kNfcCompose[mid];
        if (c.first < a || (c.first == a && c.second < b))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < kNfcComposeCount && kNfcCompose[lo].first == a && kNfcCompose[lo].second == b ? kNfcCompose[lo].composite : 0;
}

// Entries of the NFC working buffer: ccc << 24 | code point.
inline uint32_t packed(uint32_t cp) { return uint32_t(ccc_of(cp)) << 24 | cp; }

// Appends the full canonical decomposition of `cp` (itself when it has none).
void decompose_into(uint32_t cp, std::vector<uint32_t>& out) {
    if (cp - kSBase < kSCount) {
        const uint32_t s = cp - kSBase;
        out.push_back(kLBase + s / (kVCount * kTCount));
        out.push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
        if (s % kTCount) out.push_back(kTBase + s % kTCount);
        return;
    }
    size_t lo = 0, hi = kNfcDecompCount;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (kNfcDecomp[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == kNfcDecompCount || kNfcDecomp[lo].cp != cp) {
        out.push_back(packed(cp));
        return;
    }
    const NfcDecomposition& d = kNfcDecomp[lo];
    for (int i = 0; i < d.len; ++i) out.push_back(packed(kNfcDecompPool[d.offset + i]));
}

// Code point and byte length of the char at `pos`.
inline uint32_t char_at(const unsigned char* p, size_t pos, size_t& len) noexcept {
    size_t i = pos;
    const uint32_t cp = decode_utf8(p, i);
    len = i - pos;
    return cp;
}

// The ASCII letter a char stands for in the case-insensitive contraction group, or 0.
char fold(uint32_t cp) noexcept {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? static_cast<char>(cp + 32) : static_cast<char>(cp);
    for (size_t i = 0; i < kFoldExtraCount; ++i) {
        if (kFoldExtra[i].cp == cp) return kFoldExtra[i].letter;
    }
    return 0;
}

}  // namespace

uint8_t category(uint32_t cp) noexcept { return cp < 0x10000 ? bmp_table()[cp] : category_slow(cp); }

bool nfc(std::string_view text, std::string& out, std::vector<uint32_t>& buf) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    size_t i = 0;
    bool stable = true;
    while (i < n && stable) {
        if (p[i] < 0x80) {
            ++i;
            continue;
        }
        stable = !(category(decode_utf8(p, i)) & kNfcCheck);
    }
    if (stable) return false;

    // Full canonical decomposition.
    buf.clear();
    for (i = 0; i < n;) {
        if (p[i] < 0x80) {
            buf.push_back(p[i++]);
            continue;
        }
        const uint32_t cp = decode_utf8(p, i);
        if (category(cp) & kNfcCheck || cp - kSBase < kSCount) {
            decompose_into(cp, buf);
        } else {
            buf.push_back(cp);
        }
    }
    // Hangul jamo from decompose_into were pushed without their (zero) class; everything else is packed.
    const size_t m = buf.size();
    // Canonical ordering: a stable sort by class inside each run of nonzero classes (n log n for a hostile run).
    for (size_t a = 0; a < m;) {
        if (!(buf[a] >> 24)) {
            ++a;
            continue;
        }
        size_t b = a + 1;
        while (b < m && (buf[b] >> 24)) ++b;
        if (b - a > 1) std::stable_sort(buf.begin() + a, buf.begin() + b, [](uint32_t x, uint32_t y) { return (x >> 24) < (y >> 24); });
        a = b;
    }
    // Canonical composition: each char composes with the last starter unless blocked (some char in between has
    // class 0 or a class >= its own).
    size_t w = 0;
    ptrdiff_t starter = -1;
    int last = -1;  // class of the last char kept since the starter; -1: none (adjacent)
    for (size_t r = 0; r < m; ++r) {
        const uint32_t x = buf[r];
        const int k = static_cast<int>(x >> 24);
        const uint32_t cp = x & 0xFFFFFF;
        if (starter >= 0 && last < k) {
            const uint32_t c = compose_pair(buf[starter] & 0xFFFFFF, cp);
            if (c) {
                buf[starter] = c;
                continue;
            }
        }
        if (k == 0) {
            starter = static_cast<ptrdiff_t>(w);
            last = -1;
        } else {
            last = k;
        }
        buf[w++] = x;
    }
    out.clear();
    out.reserve(n + n / 2);
    for (size_t r = 0; r < w; ++r) append_utf8(out, buf[r] & 0xFFFFFF);
    return true;
}

size_t pretoken_end(std::string_view text, size_t pos) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    size_t len = 0;
    const uint32_t c = char_at(p, pos, len);
    const uint8_t cls = category(c) & kClassMask;
    const size_t next = pos + len;
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (c == '\'' && next < n) {
        size_t l1 = 0;
        const char a = fold(char_at(p, next, l1));
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return next + l1;
        if ((a == 'r' || a == 'v' || a == 'l') && next + l1 < n) {
            size_t l2 = 0;
            const char b = fold(char_at(p, next + l1, l2));
            if (b == (a == 'l' ? 'l' : 'e')) return next + l1 + l2;
        }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    size_t start = n;
    if (cls == kLetter) {
        start = pos;
    } else if (c != '\r' && c != '\n' && cls != kNumber && next < n) {
        size_t l1 = 0;
        if ((category(char_at(p, next, l1)) & kClassMask) == kLetter) start = next;
    }
    if (start < n) {
        size_t j = start;
        while (j < n) {
            size_t l = 0;
            if ((category(char_at(p, j, l)) & kClassMask) != kLetter) break;
            j += l;
        }
        return j;
    }
    // \p{N}
    if (cls == kNumber) return next;
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    if (cls == kOther) {
        start = pos;
    } else if (c == ' ' && next < n) {
        size_t l1 = 0;
        if ((category(char_at(p, next, l1)) & kClassMask) == kOther) start = next;
    }
    if (start < n) {
        size_t j = start;
        while (j < n) {
            size_t l = 0;
            if ((category(char_at(p, j, l)) & kClassMask) != kOther) break;
            j += l;
        }
        while (j < n && (p[j] == '\r' || p[j] == '\n')) ++j;
        return j;
    }
    // `c` is whitespace. \s*[\r\n]+ backtracks to the last line break of the whitespace run; without one,
    // \s+(?!\S) takes the run to the end of the text, or all of it but the last char (which then starts the next
    // piece, e.g. " word"), and a single whitespace char before \S falls through to \s+.
    size_t end = pos, last_break = n, last_start = pos;
    while (end < n) {
        size_t l = 0;
        const uint32_t x = char_at(p, end, l);
        if ((category(x) & kClassMask) != kSpace) break;
        if (x == '\r' || x == '\n') last_break = end;
        last_start = end;
        end += l;
    }
    if (last_break < n) return last_break + 1;
    if (end == n || last_start == pos) return end;
    return last_start;
}

}  // namespace cn::text::bpe_unicode
