// BERT WordPiece tokenizer: see wordpiece.h for the pipeline it reproduces. LibTorch-free.
//
// encode() streams the text once, code point by code point, through the reference's stages in the reference's
// order (clean_text, CJK spacing, NFD + nonspacing-mark removal, lowercase, pre-tokenizer, WordPiece), holding only
// the current word and the pending run of combining marks (canonical ordering) in scratch memory. ASCII skips the
// table lookups. Once max_length - 1 ids exist the rest of the text is not tokenized (it has been validated).
#include "core/tokenizers/wordpiece.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <unordered_set>

#include "core/tokenizers/unicode_tables.h"
#include "core/tokenizers/utf8.h"

namespace cn::text {

namespace {

namespace uc = unicode;

constexpr size_t kMaxVocabBytes = size_t{64} << 20;

const std::array<uint8_t, 128>& ascii_flags() {
    static const std::array<uint8_t, 128> table = [] {
        std::array<uint8_t, 128> t{};
        for (uint32_t c = 0; c < 128; ++c) t[c] = uc::flags(c);
        return t;
    }();
    return table;
}

inline uint8_t flags_of(uint32_t cp) { return cp < 128 ? ascii_flags()[cp] : uc::flags(cp); }

uint64_t hash_bytes(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then a final mix
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

std::string read_vocab_file(const std::string& path) {
    const std::string label = "vocab file '" + path + "'";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        if (e == ENOENT || e == ENOTDIR) fail(Status::kNotFound, label + ": not found");
        fail(Status::kInternal, label + ": cannot open: " + std::strerror(e));
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail(Status::kInternal, label + ": fstat failed: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(Status::kModelFormat, label + ": not a regular file");
    const size_t size = static_cast<size_t>(st.st_size);
    if (size > kMaxVocabBytes) {
        fail(Status::kModelFormat, label + ": " + std::to_string(size) + " bytes exceeds the limit of " + std::to_string(kMaxVocabBytes));
    }
    std::string text(size, '\0');
    size_t got = 0;
    while (got < size) {
        const ssize_t n = ::read(fd, text.data() + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(Status::kInternal, label + ": read failed: " + std::strerror(errno));
        if (n == 0) fail(Status::kModelFormat, label + ": file shrank while being read");
        got += static_cast<size_t>(n);
    }
    return text;
}

}  // namespace

// ---- Table --------------------------------------------------------------------------------------------------

void WordPieceTokenizer::Table::build(const std::vector<std::pair<std::string_view, int32_t>>& entries) {
    size_t cap = 16;
    while (cap < entries.size() * 2) cap *= 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    pool_.clear();
    size_t bytes = 0;
    for (const auto& e : entries) bytes += e.first.size();
    pool_.reserve(bytes);
    max_key_ = 0;
    for (const auto& [key, id] : entries) {
        const uint64_t h = hash_bytes(key);
        size_t i = static_cast<size_t>(h) & mask_;
        while (slots_[i].id >= 0) i = (i + 1) & mask_;
        slots_[i] = Slot{static_cast<uint32_t>(pool_.size()), static_cast<uint32_t>(key.size()), id, static_cast<uint32_t>(h >> 32)};
        pool_.append(key);
        max_key_ = std::max(max_key_, key.size());
    }
}

int32_t WordPieceTokenizer::Table::find(std::string_view key) const noexcept {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(key);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = static_cast<size_t>(h) & mask_;; i = (i + 1) & mask_) {
        const Slot& s = slots_[i];
        if (s.id < 0) return -1;
        if (s.hash == tag && s.len == key.size() && std::memcmp(pool_.data() + s.offset, key.data(), key.size()) == 0) {
            return s.id;
        }
    }
}

// ---- loading --------------------------------------------------------------------------------------------------

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& path, WordPieceOptions options) {
    const std::string text = read_vocab_file(path);
    return from_vocab_text(text, std::move(options), "vocab file '" + path + "'");
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_text(std::string_view text, WordPieceOptions options, const std::string& label) {
    if (options.max_length < 2) {
        fail(Status::kInvalidArgument, label + ": options.max_length must be at least 2 ([CLS] and [SEP])");
    }
    if (text.size() > kMaxVocabBytes) fail(Status::kModelFormat, label + ": too large");
    size_t bad = 0;
    const char* why = nullptr;
    if (!check_utf8(text, bad, why)) {
        const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + bad, '\n'));
        fail(Status::kModelFormat, label + ": line " + std::to_string(line) + ": invalid UTF-8 (" + why + ")");
    }

    std::vector<std::string_view> tokens;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) nl = text.size();
        std::string_view line = text.substr(pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) {
            fail(Status::kModelFormat, label + ": line " + std::to_string(tokens.size() + 1) + ": empty token");
        }
        tokens.push_back(line);
        pos = nl + 1;
    }
    if (tokens.empty()) fail(Status::kModelFormat, label + ": no tokens (empty file)");
    if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        fail(Status::kModelFormat, label + ": too many tokens");
    }

    WordPieceTokenizer t;
    std::vector<std::pair<std::string_view, int32_t>> words, pieces;
    words.reserve(tokens.size());
    {
        std::unordered_set<std::string_view> seen;
        seen.reserve(tokens.size() * 2);
        for (size_t i = 0; i < tokens.size(); ++i) {
            if (!seen.insert(tokens[i]).second) {
                fail(Status::kModelFormat,
                     label + ": line " + std::to_string(i + 1) + ": duplicate token '" + std::string(tokens[i]) + "'");
            }
            const auto id = static_cast<int32_t>(i);
            words.emplace_back(tokens[i], id);
            const std::string& pre = options.continuing_prefix;
            if (tokens[i].size() > pre.size() && tokens[i].compare(0, pre.size(), pre) == 0) {
                pieces.emplace_back(tokens[i].substr(pre.size()), id);
            }
        }
    }
    t.words_.build(words);
    t.pieces_.build(pieces);
    t.vocab_size_ = tokens.size();

    auto required = [&](const std::string& tok, const char* what) {
        const int32_t id = t.words_.find(tok);
        if (id < 0) fail(Status::kModelFormat, label + ": " + what + " '" + tok + "' is not in the vocabulary");
        return id;
    };
    t.unk_id_ = required(options.unk_token, "unknown token");
    t.cls_id_ = required(options.cls_token, "CLS token");
    t.sep_id_ = required(options.sep_token, "SEP token");
    t.pad_id_ = required(options.pad_token, "PAD token");
    for (const std::string& s : options.special_tokens) {
        if (s.empty()) fail(Status::kInvalidArgument, label + ": empty special token");
        if (!check_utf8(s, bad, why)) fail(Status::kInvalidArgument, label + ": special token is not UTF-8");
        t.specials_.push_back(Special{s, required(s, "special token")});
        t.special_first_[static_cast<unsigned char>(s[0])] = true;
    }
    std::stable_sort(t.specials_.begin(), t.specials_.end(),
                     [](const Special& a, const Special& b) { return a.text.size() > b.text.size(); });
    t.strip_ = options.strip_accents.value_or(options.lowercase);
    t.options_ = std::move(options);
    ascii_flags();  // build the static table now rather than in the first encode()
    return t;
}

int32_t WordPieceTokenizer::token_id(std::string_view token) const noexcept { return words_.find(token); }

// ---- encoding -------------------------------------------------------------------------------------------------

struct WordPieceTokenizer::Scratch {
    std::string word;           // the current word, normalized, UTF-8
    size_t word_chars = 0;      // its length in code points
    std::vector<uint32_t> run;  // pending chars of nonzero combining class (canonical ordering)
    bool stop = false;          // the id limit is reached
};

// WordPiece on s.word, appending ids; a failed word is one [UNK].
bool WordPieceTokenizer::word(Scratch& s, size_t limit, std::vector<int32_t>& ids) const {
    if (s.word_chars == 0 || s.stop) {
        s.word.clear();
        s.word_chars = 0;
        return !s.stop;
    }
    const std::string_view w = s.word;
    const size_t base = ids.size();
    if (s.word_chars > options_.max_chars_per_word) {
        ids.push_back(unk_id_);
    } else {
        const size_t n = w.size();
        size_t start = 0;
        while (start < n) {
            const Table& table = start == 0 ? words_ : pieces_;
            size_t end = std::min(n, start + table.max_key_bytes());
            while (end > start && end < n && is_utf8_continuation(static_cast<unsigned char>(w[end]))) --end;
            int32_t id = -1;
            while (end > start) {
                id = table.find(w.substr(start, end - start));
                if (id >= 0) break;
                do {
                    --end;
                } while (end > start && is_utf8_continuation(static_cast<unsigned char>(w[end])));
            }
            if (id < 0) {
                ids.resize(base);
                ids.push_back(unk_id_);
                break;
            }
            ids.push_back(id);
            start = end;
        }
    }
    s.word.clear();
    s.word_chars = 0;
    if (ids.size() >= limit) s.stop = true;
    return !s.stop;
}

// Tokenizes one stretch of text between special tokens (normalized on its own, as the reference does).
bool WordPieceTokenizer::segment(std::string_view seg, size_t limit, std::vector<int32_t>& ids, Scratch& s) const {
    const auto* p = reinterpret_cast<const unsigned char*>(seg.data());
    const size_t n = seg.size();
    const auto& af = ascii_flags();
    const bool lower = options_.lowercase, strip = strip_, cjk = options_.handle_cjk;
    const size_t max_chars = options_.max_chars_per_word;

    // Pre-tokenizer: one normalized char.
    auto emit = [&](uint32_t cp, uint8_t f) {
        if (f & uc::kSplitWs) {
            word(s, limit, ids);
        } else if (f & uc::kPunct) {
            word(s, limit, ids);
            append_utf8(s.word, cp);
            s.word_chars = 1;
            word(s, limit, ids);
        } else {
            // Past max_chars_per_word the word is [UNK] whatever it holds: count, stop storing.
            if (s.word_chars < max_chars) append_utf8(s.word, cp);
            ++s.word_chars;
        }
    };
    // After canonical ordering: drop the remaining nonspacing marks, lowercase.
    auto post = [&](uint32_t cp, uint8_t f) {
        if (strip && (f & uc::kMn)) return;
        if (lower) {
            uint32_t out[3];
            const int k = uc::to_lower(cp, out);
            if (k != 1 || out[0] != cp) {
                for (int j = 0; j < k; ++j) emit(out[j], flags_of(out[j]));
                return;
            }
        }
        emit(cp, f);
    };
    auto flush_run = [&]() {
        auto& r = s.run;
        if (r.empty()) return;
        // Stable sort by combining class (runs are a char or two; a hostile one is still n log n).
        if (r.size() > 1) {
            std::stable_sort(r.begin(), r.end(), [](uint32_t a, uint32_t b) { return uc::combining_class(a) < uc::combining_class(b); });
        }
        for (uint32_t x : r) post(x, flags_of(x));
        r.clear();
    };
    // NFD + dropping nonspacing marks of nonzero class (see unicode_tables.h), canonical ordering.
    auto one = [&](uint32_t x, uint8_t f) {
        if (f & uc::kNonzeroCcc) {
            if (!(f & uc::kMn)) s.run.push_back(x);
            return;
        }
        flush_run();
        post(x, f);
    };
    auto pre = [&](uint32_t cp, uint8_t f) {
        if (!strip) {
            post(cp, f);
            return;
        }
        uint32_t d[4];
        const int k = uc::decompose(cp, d);
        if (k < 0) {
            one(cp, f);
        } else {
            for (int j = 0; j < k; ++j) one(d[j], flags_of(d[j]));
        }
    };

    size_t i = 0;
    while (i < n && !s.stop) {
        const unsigned char b = p[i];
        if (b < 0x80) {
            ++i;
            uint8_t f = af[b];
            if (f & uc::kDrop) continue;
            uint32_t c = b;
            if (f & uc::kCleanWs) c = ' ', f = af[' '];
            if (!s.run.empty()) flush_run();
            if (lower && c >= 'A' && c <= 'Z') c += 32;
            if (f & (uc::kSplitWs | uc::kPunct)) {
                emit(c, f);
            } else {
                if (s.word_chars < max_chars) s.word.push_back(static_cast<char>(c));
                ++s.word_chars;
            }
            continue;
        }
        uint32_t cp = decode_utf8(p, i);
        uint8_t f = uc::flags(cp);
        if (f & uc::kDrop) continue;
        if (f & uc::kCleanWs) cp = ' ', f = af[' '];
        if (cjk && (f & uc::kCjk)) {
            pre(' ', af[' ']);
            pre(cp, f);
            pre(' ', af[' ']);
        } else {
            pre(cp, f);
        }
    }
    flush_run();
    word(s, limit, ids);
    return !s.stop;
}

Status WordPieceTokenizer::run(std::string_view text, size_t limit, std::vector<int32_t>& ids) const {
    Scratch s;
    s.word.reserve(64);
    ids.push_back(cls_id_);
    const size_t n = text.size();
    size_t pos = 0;
    while (!s.stop) {
        // The next special token at or after pos: leftmost, then longest.
        size_t m = specials_.empty() ? n : pos;
        const Special* hit = nullptr;
        for (; m < n; ++m) {
            if (!special_first_[static_cast<unsigned char>(text[m])]) continue;
            for (const Special& sp : specials_) {
                if (text.compare(m, sp.text.size(), sp.text) == 0) {
                    hit = &sp;
                    break;
                }
            }
            if (hit) break;
        }
        if (!segment(text.substr(pos, m - pos), limit, ids, s) || !hit) break;
        ids.push_back(hit->id);
        if (ids.size() >= limit) s.stop = true;
        pos = m + hit->text.size();
    }
    if (ids.size() > limit) ids.resize(limit);
    ids.push_back(sep_id_);
    return Status::kOk;
}

Status WordPieceTokenizer::encode_into(std::string_view utf8, size_t max_length, std::vector<int32_t>& ids,
                                       std::string& message) const noexcept {
    ids.clear();
    try {
        message.clear();
        if (max_length < 2) {
            message = "max_length must be at least 2 ([CLS] and [SEP]), got " + std::to_string(max_length);
            return Status::kInvalidArgument;
        }
        size_t bad = 0;
        const char* why = nullptr;
        if (!check_utf8(utf8, bad, why)) {
            message = "invalid UTF-8 at byte offset " + std::to_string(bad) + ": " + why;
            return Status::kInvalidArgument;
        }
        return run(utf8, max_length - 1, ids);
    } catch (const std::bad_alloc&) {
        ids.clear();
        try {
            message = "out of host memory while tokenizing";
        } catch (...) {}
        return Status::kOutOfHostMemory;
    } catch (const std::exception& e) {  // not expected; never let anything escape
        ids.clear();
        try {
            message = std::string("internal error while tokenizing: ") + e.what();
        } catch (...) {}
        return Status::kInternal;
    }
}

Encoding WordPieceTokenizer::encode(std::string_view utf8, size_t max_length) const noexcept {
    Encoding e;
    e.status = encode_into(utf8, max_length, e.ids, e.message);
    return e;
}

}  // namespace cn::text
