// Qwen2 byte-level BPE tokenizer: see bpe.h for the pipeline it reproduces. LibTorch-free.
#include "core/tokenizers/bpe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/format/json_strict.h"
#include "core/tokenizers/bpe_unicode.h"

namespace cn::text {

namespace {

using json = nlohmann::json;
namespace bu = bpe_unicode;

std::string read_bounded(const std::string& path, size_t limit) {
    const std::string label = "'" + path + "'";
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
    const auto size = static_cast<size_t>(st.st_size);
    if (size > limit) {
        fail(Status::kModelFormat, label + ": " + std::to_string(size) + " bytes exceeds the limit of " + std::to_string(limit));
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

// Refusals name the file and the field (a JSON path such as model.merges[12]).
class Checker {
public:
    explicit Checker(const std::string& label) : label_(label) {}
    [[noreturn]] void bad(const std::string& field, const std::string& why) const {
        fail(Status::kModelFormat, label_ + ": " + field + ": " + why);
    }
    // obj[key], or nullptr when absent.
    const json* get(const json& obj, const char* key) const {
        const auto it = obj.find(key);
        return it == obj.end() ? nullptr : &*it;
    }
    const json& object(const json& v, const std::string& field) const {
        if (!v.is_object()) bad(field, "expected an object");
        return v;
    }
    std::string string(const json& obj, const char* key, const std::string& field) const {
        const json* v = get(obj, key);
        if (!v || !v->is_string()) bad(field + "." + key, "expected a string");
        return v->get<std::string>();
    }
    // An absent or null field, or one equal to `allowed` (false, "" ...): anything else is not reproduced.
    void only(const json& obj, const char* key, const std::string& field, const json& allowed, const char* what) const {
        const json* v = get(obj, key);
        if (!v || v->is_null() || *v == allowed) return;
        bad(field + "." + key, std::string("value ") + v->dump() + " is not supported (" + what + ")");
    }
    static bool is_id(const json& v) {
        return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    }
    int32_t id(const json& v, const std::string& field) const {
        if (!is_id(v)) bad(field, "expected a token id (an integer in [0, 2^31))");
        return static_cast<int32_t>(v.get<int64_t>());
    }

private:
    const std::string& label_;
};

void check_normalizer(const Checker& c, const json& root, bool& nfc) {
    const json* n = c.get(root, "normalizer");
    nfc = n && !n->is_null();
    if (!nfc) return;
    c.object(*n, "normalizer");
    const std::string type = c.string(*n, "type", "normalizer");
    if (type != "NFC") c.bad("normalizer.type", "\"" + type + "\" is not supported (only NFC or none)");
}

void check_pre_tokenizer(const Checker& c, const json& root) {
    const json* p = c.get(root, "pre_tokenizer");
    if (!p || p->is_null()) c.bad("pre_tokenizer", "missing (only the Qwen2 Sequence[Split, ByteLevel] is supported)");
    c.object(*p, "pre_tokenizer");
    const std::string type = c.string(*p, "type", "pre_tokenizer");
    if (type != "Sequence") c.bad("pre_tokenizer.type", "\"" + type + "\" is not supported (only the Qwen2 Sequence[Split, ByteLevel])");
    const json* list = c.get(*p, "pretokenizers");
    if (!list || !list->is_array() || list->size() != 2) {
        c.bad("pre_tokenizer.pretokenizers", "expected exactly [Split, ByteLevel] (the Qwen2 pre-tokenizer)");
    }
    const std::string f0 = "pre_tokenizer.pretokenizers[0]", f1 = "pre_tokenizer.pretokenizers[1]";
    const json& split = c.object((*list)[0], f0);
    if (c.string(split, "type", f0) != "Split") c.bad(f0 + ".type", "expected \"Split\"");
    const json* pattern = c.get(split, "pattern");
    if (!pattern || !pattern->is_object() || !c.get(*pattern, "Regex")) c.bad(f0 + ".pattern", "expected {\"Regex\": ...}");
    const std::string regex = c.string(*pattern, "Regex", f0 + ".pattern");
    if (regex != bu::kQwen2Pattern)
        c.bad(f0 + ".pattern.Regex", "pattern " + json(regex).dump() + " is not supported (only the Qwen2 pattern)");
    if (c.string(split, "behavior", f0) != "Isolated") c.bad(f0 + ".behavior", "only \"Isolated\" is supported");
    c.only(split, "invert", f0, false, "only false");
    const json& bl = c.object((*list)[1], f1);
    if (c.string(bl, "type", f1) != "ByteLevel") c.bad(f1 + ".type", "expected \"ByteLevel\"");
    c.only(bl, "add_prefix_space", f1, false, "only false");
    c.only(bl, "use_regex", f1, false, "only false");
}

void check_post_processor(const Checker& c, const json& root) {
    const json* p = c.get(root, "post_processor");
    if (!p || p->is_null()) return;
    c.object(*p, "post_processor");
    const std::string type = c.string(*p, "type", "post_processor");
    // ByteLevel only adjusts offsets; a template would add tokens that encode() does not.
    if (type != "ByteLevel") c.bad("post_processor.type", "\"" + type + "\" is not supported (only ByteLevel or none)");
}

void check_model(const Checker& c, const json& model) {
    c.object(model, "model");
    const std::string type = c.string(model, "type", "model");
    if (type != "BPE") c.bad("model.type", "\"" + type + "\" is not supported (only BPE)");
    c.only(model, "dropout", "model", nullptr, "BPE dropout is not reproduced");
    c.only(model, "unk_token", "model", nullptr, "only byte-level BPE without an unknown token");
    c.only(model, "continuing_subword_prefix", "model", "", "only an empty prefix");
    c.only(model, "end_of_word_suffix", "model", "", "only an empty suffix");
    c.only(model, "byte_fallback", "model", false, "only false");
    c.only(model, "ignore_merges", "model", false, "only false");
}

// GPT-2's byte -> char map: printable Latin-1 bytes stand for themselves, the others for U+0100.. in byte order.
void byte_level_chars(uint32_t (&out)[256]) {
    uint32_t extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        out[b] = printable ? b : extra++;
    }
}

uint64_t mix(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ull;
    return key ^ (key >> 33);
}

inline uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

}  // namespace

// ---- loading ----------------------------------------------------------------------------------------------------

Qwen2Tokenizer Qwen2Tokenizer::from_directory(const std::string& dir) { return from_file(dir + "/tokenizer.json"); }

Qwen2Tokenizer Qwen2Tokenizer::from_file(const std::string& path) {
    const std::string text = read_bounded(path, kMaxTokenizerJsonBytes);
    return from_json_text(text, "'" + path + "'");
}

Qwen2Tokenizer Qwen2Tokenizer::from_json_text(std::string_view text, const std::string& label) {
    format::JsonLimits limits;
    limits.max_bytes = kMaxTokenizerJsonBytes;
    const json root = format::parse_json_strict(text, label, limits);
    const Checker c(label);
    c.object(root, "(top level)");
    Qwen2Tokenizer t;
    check_normalizer(c, root, t.nfc_);
    check_pre_tokenizer(c, root);
    check_post_processor(c, root);
    const json* model = c.get(root, "model");
    if (!model) c.bad("model", "missing");
    check_model(c, *model);

    // Vocabulary: spelling -> id, in one pool sorted by spelling.
    const json* vocab = c.get(*model, "vocab");
    if (!vocab || !vocab->is_object() || vocab->empty()) c.bad("model.vocab", "expected a non-empty object (token -> id)");
    int64_t max_id = -1;
    std::vector<Entry> entries;
    entries.reserve(vocab->size() + 64);
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
        if (!Checker::is_id(it.value())) c.id(it.value(), "model.vocab[" + json(it.key()).dump() + "]");
        const auto id = static_cast<int32_t>(it.value().get<int64_t>());
        entries.push_back(Entry{static_cast<uint32_t>(t.pool_.size()), static_cast<uint32_t>(it.key().size()), id});
        t.pool_ += it.key();
        max_id = std::max<int64_t>(max_id, id);
    }
    auto spelling = [&t](const Entry& e) { return std::string_view(t.pool_).substr(e.offset, e.len); };
    auto by_spelling = [&spelling](const Entry& a, const Entry& b) { return spelling(a) < spelling(b); };
    std::sort(entries.begin(), entries.end(), by_spelling);
    t.by_spelling_ = entries;  // the vocabulary alone, for the merges
    auto vocab_id = [&](std::string_view s) -> int32_t {
        const auto it = std::lower_bound(t.by_spelling_.begin(), t.by_spelling_.end(), s,
                                         [&spelling](const Entry& e, std::string_view k) { return spelling(e) < k; });
        return it != t.by_spelling_.end() && spelling(*it) == s ? it->id : -1;
    };

    // Merges: (left, right) -> (rank, merged). A pair listed twice keeps its last rank (the reference collects the
    // list into a hash map).
    const json* merges = c.get(*model, "merges");
    if (!merges || !merges->is_array()) c.bad("model.merges", "expected an array");
    if (merges->size() > std::numeric_limits<uint32_t>::max() / 4) c.bad("model.merges", "too many merges");
    size_t cap = 16;
    while (cap < merges->size() * 2) cap *= 2;
    t.merges_.assign(cap, MergeSlot{});
    t.merge_mask_ = cap - 1;
    std::unordered_map<std::string_view, int32_t> ids;  // the vocabulary again, hashed: 3 lookups a merge
    ids.reserve(t.by_spelling_.size());
    for (const Entry& e : t.by_spelling_) ids.emplace(spelling(e), e.id);
    auto merge_id = [&ids](std::string_view s) {
        const auto it = ids.find(s);
        return it == ids.end() ? -1 : it->second;
    };
    std::string joined;
    // Either every merge is [left, right] or every one is the older "left right" (the reference refuses a mix).
    const bool legacy = !merges->empty() && (*merges)[0].is_string();
    for (size_t i = 0; i < merges->size(); ++i) {
        const json& m = (*merges)[i];
        auto field = [i] { return "model.merges[" + std::to_string(i) + "]"; };
        std::string_view a, b;
        if (!legacy && m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            a = m[0].get_ref<const std::string&>();
            b = m[1].get_ref<const std::string&>();
        } else if (legacy && m.is_string()) {
            const std::string_view s = m.get_ref<const std::string&>();
            const size_t sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) c.bad(field(), "expected \"left right\"");
            a = s.substr(0, sp);
            b = s.substr(sp + 1);
        } else {
            c.bad(field(), legacy ? "expected \"left right\" like the first merge" : "expected [left, right]");
        }
        joined.assign(a);
        joined.append(b);
        const int32_t ia = merge_id(a), ib = merge_id(b), im = merge_id(joined);
        if (ia < 0 || ib < 0 || im < 0) {
            c.bad(field(), "token " +
                               json(std::string(ia < 0   ? a
                                                : ib < 0 ? b
                                                         : std::string_view(joined)))
                                   .dump() +
                               " is not in the vocabulary");
        }
        const uint64_t key = pair_key(ia, ib);
        size_t slot = static_cast<size_t>(mix(key)) & t.merge_mask_;
        while (t.merges_[slot].key != ~uint64_t{0} && t.merges_[slot].key != key) slot = (slot + 1) & t.merge_mask_;
        t.merges_[slot] = MergeSlot{key, static_cast<uint32_t>(i), im};
    }

    // The one-byte symbols.
    uint32_t chars[256];
    byte_level_chars(chars);
    for (int b = 0; b < 256; ++b) {
        std::string s;
        cn::text::append_utf8(s, chars[b]);
        t.byte_token_[b] = vocab_id(s);
    }

    // Added tokens. Their ids are assigned as the reference assigns them when it loads the file (the "id" fields are
    // only compared, with a warning): in file order, a token the vocabulary has keeps that id; any other gets the
    // vocabulary's size (its number of entries) if no added token has an id yet, or below it, else the largest added
    // id + 1. For Qwen's files (ids 0..n-1, then the added tokens in order) this gives the file's ids.
    const json* added = c.get(root, "added_tokens");
    if (added && !added->is_null()) {
        if (!added->is_array()) c.bad("added_tokens", "expected an array");
        if (added->size() > kMaxAddedTokens) c.bad("added_tokens", "more than " + std::to_string(kMaxAddedTokens) + " tokens");
        const auto model_size = static_cast<int64_t>(vocab->size());
        int64_t max_added = -1;
        std::unordered_set<std::string> seen;
        std::vector<uint32_t> scratch;
        for (size_t i = 0; i < added->size(); ++i) {
            const std::string field = "added_tokens[" + std::to_string(i) + "]";
            const json& a = c.object((*added)[i], field);
            const json* idv = c.get(a, "id");
            if (!idv) c.bad(field + ".id", "missing");
            (void)c.id(*idv, field + ".id");
            const std::string content = c.string(a, "content", field);
            if (content.empty() || content.size() > kMaxAddedTokenBytes) {
                c.bad(field + ".content", "empty or longer than " + std::to_string(kMaxAddedTokenBytes) + " bytes");
            }
            for (const char* k : {"single_word", "lstrip", "rstrip"}) c.only(a, k, field, false, "only false");
            const json* norm = c.get(a, "normalized");
            if (norm && !norm->is_boolean()) c.bad(field + ".normalized", "expected a boolean");
            const bool normalized = norm && norm->get<bool>();
            if (!seen.insert(content).second) c.bad(field + ".content", "listed twice");
            int32_t id = vocab_id(content);
            const bool in_vocab = id >= 0;
            if (!in_vocab) {
                const int64_t next = max_added < 0 ? model_size : max_added >= model_size ? max_added + 1 : model_size;
                if (next > std::numeric_limits<int32_t>::max()) c.bad(field, "too many tokens");
                id = static_cast<int32_t>(next);
            }
            max_added = std::max<int64_t>(max_added, id);
            if (!normalized) {
                t.raw_added_.add(content, id);
            } else {
                std::string nfc;
                const bool changed = t.nfc_ && bu::nfc(content, nfc, scratch);
                // Two normalized tokens with one NFC form would be matched by the reference's priority among equal
                // patterns, which this class does not reproduce.
                if (!t.normalized_added_.add(changed ? nfc : content, id)) {
                    c.bad(field + ".content", "another normalized token has the same NFC form");
                }
            }
            if (!in_vocab) {
                entries.push_back(Entry{static_cast<uint32_t>(t.pool_.size()), static_cast<uint32_t>(content.size()), id});
                t.pool_ += content;
            }
            max_id = std::max<int64_t>(max_id, id);
        }
    }
    std::sort(entries.begin(), entries.end(), by_spelling);
    t.by_spelling_ = std::move(entries);
    t.vocab_size_ = static_cast<size_t>(max_id) + 1;
    bu::category(0);  // build the lookup table now rather than in the first encode()
    return t;
}

std::optional<int32_t> Qwen2Tokenizer::token_id(std::string_view token) const {
    const auto it = std::lower_bound(by_spelling_.begin(), by_spelling_.end(), token, [this](const Entry& e, std::string_view k) {
        return std::string_view(pool_).substr(e.offset, e.len) < k;
    });
    if (it == by_spelling_.end() || std::string_view(pool_).substr(it->offset, it->len) != token) return std::nullopt;
    return it->id;
}

const Qwen2Tokenizer::MergeSlot* Qwen2Tokenizer::find_merge(int32_t left, int32_t right) const noexcept {
    const uint64_t key = pair_key(left, right);
    for (size_t slot = static_cast<size_t>(mix(key)) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
        const MergeSlot& s = merges_[slot];
        if (s.key == key) return &s;
        if (s.key == ~uint64_t{0}) return nullptr;
    }
}

// ---- added tokens -----------------------------------------------------------------------------------------------

bool Qwen2Tokenizer::AddedSet::add(std::string_view text, int32_t id) {
    uint32_t node = 0;
    for (const char ch : text) {
        const uint64_t key = uint64_t{node} << 8 | static_cast<unsigned char>(ch);
        const auto it = edges_.find(key);
        if (it != edges_.end()) {
            node = it->second;
        } else {
            terminal_.push_back(-1);
            node = static_cast<uint32_t>(terminal_.size() - 1);
            edges_.emplace(key, node);
        }
    }
    if (terminal_[node] >= 0) return false;
    terminal_[node] = id;
    starts_[static_cast<unsigned char>(text[0])] = true;
    return true;
}

int32_t Qwen2Tokenizer::AddedSet::find(std::string_view text, size_t pos, size_t& at, size_t& end) const {
    const size_t n = text.size();
    if (!empty()) {
        for (size_t m = pos; m < n; ++m) {
            if (!starts_[static_cast<unsigned char>(text[m])]) continue;
            int32_t best = -1;
            uint32_t node = 0;
            for (size_t k = m; k < n; ++k) {
                const auto it = edges_.find(uint64_t{node} << 8 | static_cast<unsigned char>(text[k]));
                if (it == edges_.end()) break;
                node = it->second;
                if (terminal_[node] >= 0) best = terminal_[node], end = k + 1;
            }
            if (best >= 0) {
                at = m;
                return best;
            }
        }
    }
    at = end = n;
    return -1;
}

// ---- encoding ---------------------------------------------------------------------------------------------------

struct Qwen2Tokenizer::Scratch {
    std::string normalized;
    std::vector<uint32_t> nfc;
    struct Symbol {
        int32_t id;
        uint32_t prev, next;  // kNone at the ends
    };
    struct Candidate {
        uint32_t rank, pos;  // pos: index of the left symbol
        int32_t left, right;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
};

namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

}  // namespace

// BPE over the bytes of one pre-tokenizer piece.
void Qwen2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& ids, Scratch& s) const {
    const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
    auto& sym = s.symbols;
    sym.clear();
    for (size_t i = 0; i < piece.size(); ++i) {
        const int32_t id = byte_token_[p[i]];
        if (id < 0) continue;  // a byte the vocabulary lacks is dropped, as the reference does without an unk token
        const auto k = static_cast<uint32_t>(sym.size());
        sym.push_back({id, k == 0 ? kNone : k - 1, kNone});
        if (k > 0) sym[k - 1].next = k;
    }
    if (sym.size() <= 1) {
        if (!sym.empty()) ids.push_back(sym[0].id);
        return;
    }
    // Min-heap on (rank, position): the lowest-ranked pair, leftmost among equals. Entries go stale as symbols
    // merge; one is still valid iff its two symbols are unchanged (a symbol only ever grows to the right, so equal
    // ids at the same position mean the same pair).
    auto& heap = s.heap;
    heap.clear();
    auto later = [](const Scratch::Candidate& a, const Scratch::Candidate& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    auto consider = [&](uint32_t pos) {
        const uint32_t nx = sym[pos].next;
        if (nx == kNone) return;
        if (const MergeSlot* m = find_merge(sym[pos].id, sym[nx].id)) {
            heap.push_back({m->rank, pos, sym[pos].id, sym[nx].id});
            std::push_heap(heap.begin(), heap.end(), later);
        }
    };
    for (uint32_t i = 0; i + 1 < sym.size(); ++i) {
        if (const MergeSlot* m = find_merge(sym[i].id, sym[i + 1].id)) heap.push_back({m->rank, i, sym[i].id, sym[i + 1].id});
    }
    std::make_heap(heap.begin(), heap.end(), later);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const Scratch::Candidate top = heap.back();
        heap.pop_back();
        Scratch::Symbol& left = sym[top.pos];
        if (left.id != top.left || left.next == kNone) continue;
        const uint32_t r = left.next;
        if (sym[r].id != top.right) continue;
        left.id = find_merge(top.left, top.right)->merged;
        left.next = sym[r].next;
        if (left.next != kNone) sym[left.next].prev = top.pos;
        sym[r].id = -1;  // gone
        if (left.prev != kNone) consider(left.prev);
        consider(top.pos);
    }
    for (uint32_t i = 0; i != kNone; i = sym[i].next) ids.push_back(sym[i].id);
}

// Pre-tokenizes and encodes normalized text, splitting first on the normalized added tokens.
void Qwen2Tokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& ids, Scratch& s) const {
    size_t pos = 0;
    while (pos < text.size()) {
        size_t at = 0, end = 0;
        const int32_t hit = normalized_added_.find(text, pos, at, end);
        for (size_t i = pos; i < at;) {
            const size_t e = bu::pretoken_end(text.substr(0, at), i);
            encode_piece(text.substr(i, e - i), ids, s);
            i = e;
        }
        if (hit >= 0) ids.push_back(hit);
        pos = end;
    }
}

std::vector<int32_t> Qwen2Tokenizer::encode(std::string_view text) const {
    size_t bad = 0;
    const char* why = nullptr;
    if (!cn::text::check_utf8(text, bad, why)) {
        fail(Status::kInvalidArgument, "invalid UTF-8 at byte offset " + std::to_string(bad) + ": " + why);
    }
    if (text.size() >= kNone / 2) fail(Status::kInvalidArgument, "text of " + std::to_string(text.size()) + " bytes is too long");
    Scratch s;
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    size_t pos = 0;
    while (pos < text.size()) {
        size_t at = 0, end = 0;
        const int32_t hit = raw_added_.find(text, pos, at, end);
        if (at > pos) {
            // Each stretch between added tokens is normalized on its own, as the reference does.
            const std::string_view seg = text.substr(pos, at - pos);
            const bool changed = nfc_ && bu::nfc(seg, s.normalized, s.nfc);
            encode_normalized(changed ? std::string_view(s.normalized) : seg, ids, s);
        }
        if (hit >= 0) ids.push_back(hit);
        pos = end;
    }
    return ids;
}

std::string zimage_chat_prompt(std::string_view prompt) {
    std::string out = "<|im_start|>user\n";
    out.reserve(out.size() + prompt.size() + 40);
    out.append(prompt);
    out += "<|im_end|>\n<|im_start|>assistant\n";
    return out;
}

}  // namespace cn::text
