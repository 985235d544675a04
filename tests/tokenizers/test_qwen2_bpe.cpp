// Qwen2 byte-level BPE tokenizer (Z-Image's Qwen3 text encoder): ids identical to HF `tokenizers` on every corpus
// text, invalid UTF-8 rejected with the byte offset, the Z-Image chat prompt, added tokens, concurrent use, and
// refusal of tokenizer.json files it does not reproduce.
// Fixtures: scripts/make_qwen_tokenizer_corpus.py (tests/fixtures/qwen_tokenizer/). The real tokenizer files come
// from $CN_QWEN_TOKENIZER_DIR (scripts/env.sh: cn_qwen_tokenizer_dir); without them those tests skip, unless
// CN_REQUIRE_QWEN_TOKENIZER=1 (scripts/test.sh), when they fail. The tiny-tokenizer tests always run.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/tokenizers/bpe.h"
#include "tests/support/fixtures.h"
#include "tests/support/text.h"

using cn::Status;
using cn::text::Qwen2Tokenizer;
using json = nlohmann::json;

namespace {

const std::string kDir = std::string(CN_FIXTURES_DIR) + "/qwen_tokenizer";

std::string qwen_dir() {
    const char* d = std::getenv("CN_QWEN_TOKENIZER_DIR");
    return d ? d : "";
}

bool require_qwen() {
    const char* r = std::getenv("CN_REQUIRE_QWEN_TOKENIZER");
    return r && std::string(r) == "1";
}

#define NEED_QWEN()                                                                                                \
    do {                                                                                                           \
        if (qwen_dir().empty() || !std::ifstream(qwen_dir() + "/tokenizer.json")) {                                \
            if (require_qwen()) FAIL() << "CN_QWEN_TOKENIZER_DIR does not name the Qwen tokenizer directory";      \
            std::printf("SKIPPED: no Qwen tokenizer (set CN_QWEN_TOKENIZER_DIR; scripts/setup.sh installs it)\n"); \
            GTEST_SKIP() << "no Qwen tokenizer files";                                                             \
        }                                                                                                          \
    } while (0)

const Qwen2Tokenizer& qwen() {
    static const Qwen2Tokenizer t = Qwen2Tokenizer::from_directory(qwen_dir());
    return t;
}

const Qwen2Tokenizer& tiny() {
    static const Qwen2Tokenizer t = Qwen2Tokenizer::from_file(kDir + "/tiny_tokenizer.json");
    return t;
}

struct Row {
    size_t index = 0;
    std::string cat, text, prompt;
    std::vector<int32_t> ids;
    size_t bad_offset = 0;  // invalid_utf8 rows
};

std::vector<Row> read_jsonl(const std::string& path) {
    std::vector<Row> rows;
    std::istringstream in(cn::test::read_file(path));
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const json j = json::parse(line);
        Row r;
        r.index = rows.size();
        r.cat = j.value("cat", "");
        if (r.cat == "invalid_utf8") {
            const std::string hex = j.at("hex").get<std::string>();
            for (size_t i = 0; i + 1 < hex.size(); i += 2) r.text.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
            r.bad_offset = j.at("offset").get<size_t>();
        } else {
            r.text = j.at("text").get<std::string>();
            r.ids = j.at("ids").get<std::vector<int32_t>>();
            r.prompt = j.value("prompt", "");
        }
        rows.push_back(std::move(r));
    }
    return rows;
}

const std::vector<Row>& corpus() {
    static const std::vector<Row> rows = read_jsonl(kDir + "/corpus.jsonl");
    return rows;
}

std::string ids_str(const std::vector<int32_t>& ids, size_t max = 64) {
    std::ostringstream o;
    o << "[";
    for (size_t i = 0; i < ids.size() && i < max; ++i) o << (i ? "," : "") << ids[i];
    if (ids.size() > max) o << ",... (" << ids.size() << " ids)";
    o << "]";
    return o.str();
}

// The first row whose ids differ, described; empty when all agree.
std::string first_mismatch(const Qwen2Tokenizer& t, const std::vector<Row>& rows, size_t& checked) {
    checked = 0;
    for (const Row& r : rows) {
        if (r.cat == "invalid_utf8") continue;
        std::vector<int32_t> got;
        try {
            got = t.encode(r.text);
        } catch (const cn::Error& e) {
            return "row " + std::to_string(r.index) + " (" + r.cat + ") \"" + cn::test::escaped(r.text, 120) + "\": threw " + e.message();
        }
        ++checked;
        if (got != r.ids) {
            size_t k = 0;
            while (k < got.size() && k < r.ids.size() && got[k] == r.ids[k]) ++k;
            return "row " + std::to_string(r.index) + " (" + r.cat + ") \"" + cn::test::escaped(r.text, 120) +
                   "\": first difference at id " + std::to_string(k) + "\n  expected " + ids_str(r.ids) + "\n  got      " + ids_str(got);
        }
    }
    return "";
}

template <class F>
void expect_error(F&& f, Status status, const std::string& needle) {
    try {
        f();
        ADD_FAILURE() << "no error; expected: " << needle;
    } catch (const cn::Error& e) {
        EXPECT_EQ(e.status(), status) << e.message();
        EXPECT_NE(e.message().find(needle), std::string::npos) << "message: " << e.message();
    }
}

}  // namespace

// ---- the real Qwen3 tokenizer ---------------------------------------------------------------------------------

TEST(Qwen2Bpe, LoadsTheRealTokenizer) {
    NEED_QWEN();
    const auto& t = qwen();
    EXPECT_EQ(t.vocab_size(), 151669u);  // len(tokenizer) in transformers
    EXPECT_EQ(t.token_id("<|endoftext|>"), 151643);
    EXPECT_EQ(t.token_id("<|im_start|>"), 151644);
    EXPECT_EQ(t.token_id("<|im_end|>"), 151645);
    EXPECT_EQ(t.token_id("<think>"), 151667);
    EXPECT_EQ(t.token_id("</think>"), 151668);
    EXPECT_EQ(t.token_id("!"), 0);
    EXPECT_EQ(t.token_id("\xC4\xA0"), 220);  // "Ġ": the byte-level spelling of " "
    EXPECT_EQ(t.token_id("user"), 872);
    EXPECT_EQ(t.token_id("assistant"), 77091);
    EXPECT_FALSE(t.token_id("<|im_end"));
    EXPECT_FALSE(t.token_id(""));
    EXPECT_FALSE(t.token_id(" "));  // not a byte-level spelling
}

TEST(Qwen2Bpe, CorpusMatchesReference) {
    NEED_QWEN();
    const auto& rows = corpus();
    size_t checked = 0;
    const std::string mismatch = first_mismatch(qwen(), rows, checked);
    ASSERT_TRUE(mismatch.empty()) << mismatch;
    EXPECT_GE(checked, 2000u) << "the corpus is smaller than expected";
    std::map<std::string, size_t> cats;
    for (const Row& r : rows) ++cats[r.cat];
    for (const char* c : {"english", "cjk", "emoji", "combining", "digits", "whitespace", "contractions", "punctuation", "special_tokens",
                          "mixed", "random_code_points", "long", "chat", "invalid_utf8"}) {
        EXPECT_GT(cats[c], 0u) << c;
    }
}

TEST(Qwen2Bpe, InvalidUtf8IsRejectedWithTheOffset) {
    NEED_QWEN();
    size_t n = 0;
    for (const Row& r : corpus()) {
        if (r.cat != "invalid_utf8") continue;
        ++n;
        SCOPED_TRACE("row " + std::to_string(r.index) + " \"" + cn::test::escaped(r.text, 120) + "\"");
        expect_error([&] { (void)qwen().encode(r.text); }, Status::kInvalidArgument,
                     "invalid UTF-8 at byte offset " + std::to_string(r.bad_offset) + ":");
    }
    EXPECT_GE(n, 30u);
    // A valid prefix does not help: the whole text is checked before anything is tokenized.
    expect_error([] { (void)qwen().encode(std::string("<|im_end|>ok\xED\xA0\x80")); }, Status::kInvalidArgument, "surrogate");
}

TEST(Qwen2Bpe, NulAndControlCharsAreText) {
    NEED_QWEN();
    // The reference treats NUL as an ordinary char (byte-level token "Ā" = 188), neither dropped nor a terminator.
    EXPECT_EQ(qwen().encode(std::string("x\0y", 3)), (std::vector<int32_t>{87, 188, 88}));
    EXPECT_EQ(qwen().encode(std::string(1, '\0')), (std::vector<int32_t>{188}));
    EXPECT_TRUE(qwen().encode("").empty());
}

TEST(Qwen2Bpe, AddedTokens) {
    NEED_QWEN();
    const auto& t = qwen();
    EXPECT_EQ(t.encode("a<|im_end|>b"), (std::vector<int32_t>{64, 151645, 65}));
    const char* added[] = {"<|endoftext|>",  "<|im_start|>",   "<|im_end|>",      "<|object_ref_start|>", "<|object_ref_end|>",
                           "<|box_start|>",  "<|box_end|>",    "<|quad_start|>",  "<|quad_end|>",         "<|vision_start|>",
                           "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>",   "<|video_pad|>",        "<tool_call>",
                           "</tool_call>",   "<|fim_prefix|>", "<|fim_middle|>",  "<|fim_suffix|>",       "<|fim_pad|>",
                           "<|repo_name|>",  "<|file_sep|>",   "<tool_response>", "</tool_response>",     "<think>",
                           "</think>"};
    int32_t expected = 151643;
    for (const char* a : added) {
        EXPECT_EQ(t.token_id(a), expected) << a;
        EXPECT_EQ(t.encode(a), std::vector<int32_t>{expected}) << a;
        ++expected;
    }
    // Matched before normalization and pre-tokenization, also inside words and next to each other.
    EXPECT_EQ(t.encode("<|im_end|><|im_end|>"), (std::vector<int32_t>{151645, 151645}));
    const auto partial = t.encode("<|im_end");
    EXPECT_EQ(std::count(partial.begin(), partial.end(), 151645), 0);
}

TEST(Qwen2Bpe, ZImageChatPrompt) {
    EXPECT_EQ(cn::text::zimage_chat_prompt("a cat"), "<|im_start|>user\na cat<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(cn::text::zimage_chat_prompt(""), "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");
    NEED_QWEN();
    size_t n = 0;
    for (const Row& r : corpus()) {
        if (r.cat != "chat") continue;
        ++n;
        // The corpus script checked each against transformers' apply_chat_template.
        EXPECT_EQ(cn::text::zimage_chat_prompt(r.prompt), r.text) << "row " << r.index;
        EXPECT_EQ(qwen().encode(cn::text::zimage_chat_prompt(r.prompt)), r.ids) << "row " << r.index;
    }
    EXPECT_GE(n, 50u);
    const std::vector<int32_t> empty = qwen().encode(cn::text::zimage_chat_prompt(""));
    EXPECT_EQ(empty, (std::vector<int32_t>{151644, 872, 198, 151645, 198, 151644, 77091, 198}));
}

TEST(Qwen2Bpe, ConcurrentEncodesAgree) {
    NEED_QWEN();
    const auto& t = qwen();
    const auto& rows = corpus();
    std::vector<std::string> failures(6);
    std::vector<std::thread> threads;
    for (size_t k = 0; k < failures.size(); ++k) {
        threads.emplace_back([&, k] {
            // Each thread walks the corpus from a different start so different texts run at the same time.
            for (size_t n = 0; n < rows.size(); ++n) {
                const Row& r = rows[(n + k * rows.size() / failures.size()) % rows.size()];
                if (r.cat == "invalid_utf8") continue;
                if (t.encode(r.text) != r.ids) {
                    failures[k] = "thread " + std::to_string(k) + ": row " + std::to_string(r.index);
                    return;
                }
            }
        });
    }
    for (auto& th : threads) th.join();
    for (const auto& f : failures) EXPECT_TRUE(f.empty()) << f;
}

TEST(Qwen2Bpe, PathologicalInputsStayFast) {
    NEED_QWEN();
    const auto& t = qwen();
    // One pre-tokenizer piece of 200k letters (one BPE word), 200k spaces, 100k combining marks on one base char:
    // n log n each. Timings are printed, not asserted (CONTRIBUTING.md).
    std::string mixed;
    uint32_t x = 12345;
    for (int i = 0; i < 200000; ++i) {
        x = x * 1103515245u + 12345u;
        mixed.push_back(static_cast<char>('a' + (x >> 16) % 26));
    }
    std::string marks = "e";
    for (int i = 0; i < 100000; ++i) marks += (i % 2) ? "\xCC\x81" : "\xCC\xA3";  // U+0301, U+0323
    const std::pair<const char*, std::string> cases[] = {{"200k 'a'", std::string(200000, 'a')},
                                                         {"200k random letters", mixed},
                                                         {"200k spaces", std::string(200000, ' ')},
                                                         {"100k marks", marks}};
    for (const auto& [name, text] : cases) {
        const auto t0 = std::chrono::steady_clock::now();
        const auto ids = t.encode(text);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::printf("%s: %zu ids in %.1f ms\n", name, ids.size(), ms);
        EXPECT_FALSE(ids.empty());
        for (int32_t id : ids) ASSERT_TRUE(id >= 0 && static_cast<size_t>(id) < t.vocab_size());
    }
}

// ---- the tiny tokenizer (always runs) --------------------------------------------------------------------------

TEST(Qwen2BpeTiny, MatchesReference) {
    // tiny_tokenizer.json: a normalized added token, overlapping added tokens, a duplicate merge, a byte missing from
    // the vocabulary, a gap in the vocabulary's ids (the reference then gives the first added token an id that a
    // vocabulary token also has).
    const auto rows = read_jsonl(kDir + "/tiny_cases.jsonl");
    ASSERT_GE(rows.size(), 30u);
    size_t checked = 0;
    const std::string mismatch = first_mismatch(tiny(), rows, checked);
    ASSERT_TRUE(mismatch.empty()) << mismatch;
    EXPECT_EQ(checked, rows.size());
    EXPECT_EQ(tiny().token_id("<|im_end|>"), 267);
    EXPECT_EQ(tiny().token_id("abc"), 258);  // an added token the vocabulary has keeps the vocabulary's id
    EXPECT_EQ(tiny().vocab_size(), 274u);
}

TEST(Qwen2BpeTiny, LegacyMergeSpellingGivesTheSameIds) {
    json j = json::parse(cn::test::read_file(kDir + "/tiny_tokenizer.json"));
    json legacy = json::array();
    for (const auto& m : j["model"]["merges"]) legacy.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    j["model"]["merges"] = legacy;
    const Qwen2Tokenizer t = Qwen2Tokenizer::from_json_text(j.dump(), "legacy");
    for (const Row& r : read_jsonl(kDir + "/tiny_cases.jsonl")) EXPECT_EQ(t.encode(r.text), r.ids) << cn::test::escaped(r.text, 120);
}

TEST(Qwen2BpeTiny, RefusesWhatItDoesNotReproduce) {
    const json base = json::parse(cn::test::read_file(kDir + "/tiny_tokenizer.json"));
    auto refused = [&](const char* field, auto&& edit) {
        json j = base;
        edit(j);
        SCOPED_TRACE(field);
        expect_error([&] { (void)Qwen2Tokenizer::from_json_text(j.dump(), "tiny.json"); }, Status::kModelFormat,
                     std::string("tiny.json: ") + field);
    };
    refused("normalizer.type", [](json& j) { j["normalizer"] = {{"type", "NFKC"}}; });
    refused("pre_tokenizer.type", [](json& j) { j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}}; });
    refused("pre_tokenizer.pretokenizers[0].pattern.Regex",
            [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+"; });
    refused("pre_tokenizer.pretokenizers[0].behavior", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; });
    refused("pre_tokenizer.pretokenizers[1].add_prefix_space",
            [](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; });
    refused("pre_tokenizer.pretokenizers[1].use_regex", [](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true; });
    refused("post_processor.type", [](json& j) { j["post_processor"] = {{"type", "TemplateProcessing"}}; });
    refused("model.type", [](json& j) { j["model"]["type"] = "WordPiece"; });
    refused("model.dropout", [](json& j) { j["model"]["dropout"] = 0.1; });
    refused("model.unk_token", [](json& j) { j["model"]["unk_token"] = "a"; });
    refused("model.byte_fallback", [](json& j) { j["model"]["byte_fallback"] = true; });
    refused("model.ignore_merges", [](json& j) { j["model"]["ignore_merges"] = true; });
    refused("model.continuing_subword_prefix", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; });
    refused("model.vocab", [](json& j) { j["model"]["vocab"] = json::array(); });
    refused("model.vocab[\"a\"]", [](json& j) { j["model"]["vocab"]["a"] = -1; });
    refused("model.merges[0]", [](json& j) { j["model"]["merges"][0] = {"a", "not-in-vocab"}; });
    refused("model.merges[1]", [](json& j) { j["model"]["merges"][1] = "b c"; });  // a mix of the two spellings
    refused("model.merges", [](json& j) { j["model"].erase("merges"); });
    refused("model", [](json& j) { j.erase("model"); });
    refused("added_tokens[0].lstrip", [](json& j) { j["added_tokens"][0]["lstrip"] = true; });
    refused("added_tokens[1].single_word", [](json& j) { j["added_tokens"][1]["single_word"] = true; });
    refused("added_tokens[2].content", [](json& j) { j["added_tokens"][2]["content"] = ""; });
    refused("added_tokens[1].content", [](json& j) { j["added_tokens"][1]["content"] = j["added_tokens"][0]["content"]; });
    refused("added_tokens[0].content", [](json& j) { j["added_tokens"][0]["content"] = std::string(300, 'x'); });
    refused("added_tokens[8].content", [](json& j) {  // the NFC form of a normalized token already there
        json a = j["added_tokens"][6];
        a["content"] = "A\u030Angstr\u00F6m";
        a["id"] = 999;
        j["added_tokens"].push_back(a);
    });
    // Not JSON, or not this kind of JSON.
    expect_error([] { (void)Qwen2Tokenizer::from_json_text("{\"model\": ", "tiny.json"); }, Status::kModelFormat, "tiny.json");
    expect_error([] { (void)Qwen2Tokenizer::from_json_text("[]", "tiny.json"); }, Status::kModelFormat, "expected an object");
    expect_error([] { (void)Qwen2Tokenizer::from_directory("/nonexistent-dir"); }, Status::kNotFound, "tokenizer.json");
    expect_error([] { (void)Qwen2Tokenizer::from_file(kDir); }, Status::kModelFormat, "not a regular file");
}

TEST(Qwen2Bpe, TruncatedRealFileIsRefused) {
    NEED_QWEN();
    const std::string text = cn::test::read_file(qwen_dir() + "/tokenizer.json");
    cn::test::TempDir tmp;
    cn::test::write_file(tmp.file("tokenizer.json"), text.substr(0, text.size() / 2));
    expect_error([&] { (void)Qwen2Tokenizer::from_directory(tmp.path()); }, Status::kModelFormat, "tokenizer.json");
}
