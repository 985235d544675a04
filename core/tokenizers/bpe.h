// Qwen2 byte-level BPE tokenizer, LibTorch-free: an exact re-implementation of what HF `tokenizers` (Rust) does
// with the tokenizer.json of Qwen2/Qwen3 (tokenizer_class "Qwen2Tokenizer"; Z-Image's text encoder is Qwen3),
// i.e. `Tokenizer.from_file(tokenizer.json).encode(text, add_special_tokens=False).ids`, which is also what
// transformers' tokenizer gives for it before its own padding and truncation:
//   added tokens  matched as whole strings (leftmost, then longest) in the raw text before anything else, each one
//                 id; tokens marked "normalized": true are matched instead in the NFC text of each stretch between
//                 the others, by their NFC form (HF's AddedVocabulary). Their ids are the ones the reference assigns
//                 on load, not the file's "id" fields (which it only compares): see from_json_text in bpe.cpp
//   normalizer    NFC (or none), each stretch between added tokens on its own
//   pre-tokenizer Split with the Qwen2 regex (bpe_unicode.h), behaviour Isolated, then ByteLevel (bytes as symbols)
//   model         BPE over the bytes of each piece: repeatedly merge the adjacent pair of lowest merge rank
//                 (leftmost first), with a priority queue over a linked list: O(n log n) per piece
//   post-process  none (the ByteLevel post-processor changes offsets only)
// Anything else in a tokenizer.json (another normalizer, pre-tokenizer, pattern or model type; BPE dropout, unk
// token, byte fallback, ignore_merges, word affixes; added tokens with lstrip/rstrip/single_word, or beyond
// kMaxAddedTokens / kMaxAddedTokenBytes) is refused with kModelFormat naming the file and the field, rather than
// silently tokenized differently. The file's "truncation" and "padding" are ignored: encode() returns every id (the
// caller pads and truncates).
// The Unicode data is probed from the reference library itself (scripts/gen_bpe_unicode_tables.py);
// tests/tokenizers/test_qwen2_bpe.cpp checks ids against the reference on tests/fixtures/qwen_tokenizer/.
//
// Thread safety: a Qwen2Tokenizer is immutable once loaded; encode() is const, keeps no cache and uses only
// per-call scratch memory, so any number of threads may call it on one instance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cn::text {

class Qwen2Tokenizer {
public:
    // Loads `dir`/tokenizer.json. Throws cn::Error: kNotFound when the file is missing, kModelFormat when it is not
    // a regular file, larger than kMaxTokenizerJsonBytes, not valid JSON, or describes a pipeline this class does not
    // reproduce (the message names the file and the field).
    static Qwen2Tokenizer from_directory(const std::string& dir);
    static Qwen2Tokenizer from_file(const std::string& tokenizer_json_path);
    // The same from the file's contents; `label` names the source in messages.
    static Qwen2Tokenizer from_json_text(std::string_view text, const std::string& label = "tokenizer.json");

    static constexpr size_t kMaxTokenizerJsonBytes = size_t{64} << 20;
    // Bounds on the added tokens (Qwen3: 26 of at most 20 bytes); a file beyond them is refused.
    static constexpr size_t kMaxAddedTokens = 65536, kMaxAddedTokenBytes = 256;

    // Token ids of UTF-8 text (no special tokens added). Throws cn::Error kInvalidArgument for invalid UTF-8 (the
    // message gives the byte offset and the reason). NUL and other control chars are ordinary text, as in the
    // reference. An empty text gives no ids.
    std::vector<int32_t> encode(std::string_view utf8) const;

    // Id of a token spelled as in tokenizer.json: an added token's content ("<|im_end|>") or a vocabulary entry in
    // its byte-level spelling ("Ġthe"); nullopt when there is none.
    std::optional<int32_t> token_id(std::string_view token) const;
    // 1 + the largest id (vocabulary and added tokens): the size of the id space (151669 for Qwen3, len(tokenizer)
    // in transformers).
    size_t vocab_size() const noexcept { return vocab_size_; }

    Qwen2Tokenizer(Qwen2Tokenizer&&) noexcept = default;
    Qwen2Tokenizer& operator=(Qwen2Tokenizer&&) noexcept = default;
    Qwen2Tokenizer(const Qwen2Tokenizer&) = delete;
    Qwen2Tokenizer& operator=(const Qwen2Tokenizer&) = delete;
    ~Qwen2Tokenizer() = default;

private:
    struct Scratch;
    // The added tokens matched in one text (the raw or the normalized one): a byte trie over their texts (the raw
    // content, or its NFC form for normalized tokens) for leftmost-longest matching in O(text x longest token).
    class AddedSet {
    public:
        // False when `text` is already in the set.
        bool add(std::string_view text, int32_t id);
        // The leftmost, then longest, token at or after `pos`: returns its id and sets [at, end), or returns -1 and
        // sets at = end = text.size().
        int32_t find(std::string_view text, size_t pos, size_t& at, size_t& end) const;
        bool empty() const noexcept { return terminal_.size() <= 1; }

    private:
        std::vector<int32_t> terminal_ = {-1};          // per node: id of the token ending there, or -1; node 0: root
        std::unordered_map<uint64_t, uint32_t> edges_;  // node << 8 | byte -> child
        bool starts_[256] = {};                         // bytes some token starts with
    };
    // Open addressing: (left id, right id) -> (rank, merged id).
    struct MergeSlot {
        uint64_t key = ~uint64_t{0};  // empty
        uint32_t rank = 0;
        int32_t merged = -1;
    };
    struct Entry {
        uint32_t offset, len;  // in pool_
        int32_t id;
    };

    Qwen2Tokenizer() = default;
    const MergeSlot* find_merge(int32_t left, int32_t right) const noexcept;
    void encode_normalized(std::string_view text, std::vector<int32_t>& ids, Scratch& s) const;
    void encode_piece(std::string_view piece, std::vector<int32_t>& ids, Scratch& s) const;

    bool nfc_ = true;
    int32_t byte_token_[256] = {};  // id of each byte's one-symbol token, -1 when the vocabulary lacks it (skipped)
    std::vector<MergeSlot> merges_;
    size_t merge_mask_ = 0;
    AddedSet raw_added_, normalized_added_;  // matched in the raw / the normalized text
    std::string pool_;                       // spellings of the vocabulary and the added tokens
    std::vector<Entry> by_spelling_;         // sorted by spelling
    size_t vocab_size_ = 0;
};

// The text ZImagePipeline tokenizes for a prompt: Qwen3's chat template applied to one user message with
// add_generation_prompt=True and enable_thinking=True, i.e.
//   "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n"
// The template inserts the content verbatim (no stripping, no escaping) and, for a single user message, nothing in
// it depends on the content: "<think>", "</think>" and "<tool_response>" only change assistant and tool messages.
// scripts/make_qwen_tokenizer_corpus.py checks this against transformers' apply_chat_template on every corpus text.
std::string zimage_chat_prompt(std::string_view prompt);

}  // namespace cn::text
