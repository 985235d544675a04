// BERT (uncased) WordPiece tokenizer, LibTorch-free: an exact re-implementation of what sentence-transformers
// runs for all-MiniLM-L6-v2, i.e. the HF `tokenizers` fast tokenizer built from tokenizer.json:
//   added tokens  [PAD] [UNK] [CLS] [SEP] [MASK] are matched verbatim (case-sensitive, before any normalization)
//                 anywhere in the raw text and map straight to their ids (tokenizer.json: normalized = false)
//   normalizer    BertNormalizer: clean_text (drop NUL, U+FFFD and control/format chars, whitespace -> ' '),
//                 spaces around CJK ideographs, accent stripping (NFD, drop nonspacing marks; on when lowercasing
//                 unless set), lowercasing (char by char, Rust char::to_lowercase)
//   pre-tokenizer BertPreTokenizer: split on whitespace, every punctuation char a word of its own
//   model         WordPiece: greedy longest match from the left, "##" on continuation pieces; a word with an
//                 unmatchable part, or longer than max_chars_per_word chars, is one [UNK]
//   post-process  [CLS] ... [SEP], truncated to max_length ids in total (sentence-transformers: 256)
// The Unicode tables (unicode_tables.h) are probed from the reference library itself; see
// scripts/gen_unicode_tables.py. tests/tokenizers/test_wordpiece.cpp checks ids against sentence-transformers.
//
// Thread safety: a WordPieceTokenizer is immutable once constructed; encode() is const, uses only local scratch
// memory and may be called concurrently from any number of threads on one instance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"

namespace cn::text {

struct WordPieceOptions {
    bool lowercase = true;
    std::optional<bool> strip_accents;  // unset: same as `lowercase` (BERT's rule; tokenizer.json: null)
    bool handle_cjk = true;             // spaces around CJK ideographs (tokenize_chinese_chars)
    size_t max_chars_per_word = 100;    // longer words (in chars, after normalization) become [UNK]
    std::string continuing_prefix = "##";
    std::string unk_token = "[UNK]";
    std::string cls_token = "[CLS]";
    std::string sep_token = "[SEP]";
    std::string pad_token = "[PAD]";
    // Matched verbatim in the raw text (leftmost, longest first) and emitted as their own ids. Each must be in
    // the vocabulary.
    std::vector<std::string> special_tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    size_t max_length = 256;  // default for encode(text): ids in total, [CLS] and [SEP] included
};

struct Encoding {
    Status status = Status::kOk;
    std::string message;       // empty when ok
    std::vector<int32_t> ids;  // [CLS] ... [SEP]; empty on error
    bool ok() const noexcept { return status == Status::kOk; }
};

class WordPieceTokenizer {
public:
    // Loads a vocab.txt (one token per line, id = line number, UTF-8, LF or CRLF). Throws cn::Error: kNotFound when
    // the file is missing, kModelFormat when it is not a regular file, too large, not UTF-8, has an empty or a
    // duplicate token, or lacks one of the options' tokens; kInvalidArgument for inconsistent options.
    static WordPieceTokenizer from_vocab_file(const std::string& path, WordPieceOptions options = {});
    // The same from the file's contents; `label` names the source in messages.
    static WordPieceTokenizer from_vocab_text(std::string_view text, WordPieceOptions options, const std::string& label = "vocab");

    // Tokenizes UTF-8 text into [CLS] pieces... [SEP], at most `max_length` (>= 2) ids. Never throws: invalid UTF-8
    // (the message gives the byte offset and the reason) or max_length < 2 give kInvalidArgument, allocation
    // failure kOutOfHostMemory.
    Encoding encode(std::string_view utf8) const noexcept { return encode(utf8, options_.max_length); }
    Encoding encode(std::string_view utf8, size_t max_length) const noexcept;
    // The same into caller-owned storage (reused capacity, no other allocation for short texts). On error `ids` is
    // empty and `message` says why.
    Status encode_into(std::string_view utf8, size_t max_length, std::vector<int32_t>& ids, std::string& message) const noexcept;

    // Id of a vocabulary token, or -1.
    int32_t token_id(std::string_view token) const noexcept;
    size_t vocab_size() const noexcept { return vocab_size_; }
    int32_t cls_id() const noexcept { return cls_id_; }
    int32_t sep_id() const noexcept { return sep_id_; }
    int32_t pad_id() const noexcept { return pad_id_; }
    int32_t unk_id() const noexcept { return unk_id_; }
    const WordPieceOptions& options() const noexcept { return options_; }

    // An open-addressing string -> id table over one character pool (lookups by string_view, no allocation).
    class Table {
    public:
        void build(const std::vector<std::pair<std::string_view, int32_t>>& entries);
        int32_t find(std::string_view key) const noexcept;
        size_t max_key_bytes() const noexcept { return max_key_; }

    private:
        struct Slot {
            uint32_t offset = 0, len = 0;
            int32_t id = -1;  // -1: empty
            uint32_t hash = 0;
        };
        std::string pool_;
        std::vector<Slot> slots_;
        size_t mask_ = 0, max_key_ = 0;
    };

private:
    struct Scratch;
    WordPieceTokenizer() = default;
    Status run(std::string_view text, size_t limit, std::vector<int32_t>& ids) const;
    bool segment(std::string_view seg, size_t limit, std::vector<int32_t>& ids, Scratch& s) const;
    bool word(Scratch& s, size_t limit, std::vector<int32_t>& ids) const;

    WordPieceOptions options_;
    bool strip_ = true;
    Table words_;   // every token, for the first piece of a word
    Table pieces_;  // tokens that start with the continuing prefix, prefix removed
    size_t vocab_size_ = 0;
    int32_t cls_id_ = -1, sep_id_ = -1, pad_id_ = -1, unk_id_ = -1;
    struct Special {
        std::string text;
        int32_t id;
    };
    std::vector<Special> specials_;  // longest first
    bool special_first_[256] = {};
};

}  // namespace cn::text
