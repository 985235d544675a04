// BERT WordPiece tokenizer: ids identical to sentence-transformers' (all-MiniLM-L6-v2) on every fixture text,
// invalid UTF-8 rejected with a message, truncation, vocabulary errors, random bytes never crash.
// Fixtures: scripts/make_minilm_fixtures.py (tests/fixtures/minilm/).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/tokenizers/unicode_tables.h"
#include "core/tokenizers/wordpiece.h"
#include "tests/support/fixtures.h"
#include "tests/support/text.h"

using cn::Status;
using cn::text::WordPieceOptions;
using cn::text::WordPieceTokenizer;

namespace {

const std::string kDir = std::string(CN_FIXTURES_DIR) + "/minilm";

const WordPieceTokenizer& tokenizer() {
    static const WordPieceTokenizer t = WordPieceTokenizer::from_vocab_file(kDir + "/vocab.txt");
    return t;
}

struct Case {
    std::string name, text;
    std::vector<int32_t> ids;
};

struct Fixtures {
    size_t max_length = 0;
    std::vector<Case> cases;
};

const Fixtures& fixtures() {
    static const Fixtures f = [] {
        Fixtures f;
        const auto j = nlohmann::json::parse(cn::test::read_file(kDir + "/tokens.json"));
        f.max_length = j.at("max_length").get<size_t>();
        for (const auto& c : j.at("cases")) {
            f.cases.push_back({c.at("name").get<std::string>(), c.at("text").get<std::string>(), c.at("ids").get<std::vector<int32_t>>()});
        }
        return f;
    }();
    return f;
}

std::string ids_str(const std::vector<int32_t>& ids) {
    std::ostringstream o;
    o << "[";
    for (size_t i = 0; i < ids.size(); ++i) o << (i ? "," : "") << ids[i];
    o << "]";
    return o.str();
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

TEST(WordPiece, VocabularyLoads) {
    const auto& t = tokenizer();
    EXPECT_EQ(t.vocab_size(), 30522u);
    EXPECT_EQ(t.pad_id(), 0);
    EXPECT_EQ(t.unk_id(), 100);
    EXPECT_EQ(t.cls_id(), 101);
    EXPECT_EQ(t.sep_id(), 102);
    EXPECT_EQ(t.token_id("[MASK]"), 103);
    EXPECT_EQ(t.token_id("the"), 1996);
    EXPECT_EQ(t.token_id("##s"), 2015);
    EXPECT_EQ(t.token_id("not-a-token"), -1);
}

TEST(WordPiece, IdsMatchSentenceTransformers) {
    const auto& f = fixtures();
    ASSERT_GE(f.cases.size(), 300u);
    ASSERT_EQ(f.max_length, 256u);
    size_t pass = 0;
    for (const Case& c : f.cases) {
        const auto e = tokenizer().encode(c.text, f.max_length);
        if (!e.ok()) {
            ADD_FAILURE() << c.name << ": error " << e.message << "\n  text: " << cn::test::escaped(c.text, 160);
            continue;
        }
        if (e.ids != c.ids) {
            ADD_FAILURE() << c.name << ": ids differ\n  text:      " << cn::test::escaped(c.text, 160)
                          << "\n  reference: " << ids_str(c.ids) << "\n  ours:      " << ids_str(e.ids);
            continue;
        }
        ++pass;
    }
    std::printf("[ fixtures ] %zu of %zu texts give the reference ids\n", pass, f.cases.size());
    EXPECT_EQ(pass, f.cases.size());
}

// Every code point the reference normalizes or splits specially (lowercase, NFD, dropped marks and controls,
// whitespace, punctuation, CJK), where MiniLM's vocabulary would only show [UNK]: with a vocabulary of every char of
// the reference's words (plus "##" + char), the ids spell the normalized words out.
TEST(WordPiece, NormalizedWordsMatchReference) {
    const auto j = nlohmann::json::parse(cn::test::read_file(kDir + "/normalization.json"));
    std::vector<std::pair<std::string, std::string>> cases;
    for (const auto& c : j.at("cases")) {
        cases.emplace_back(c.at("text").get<std::string>(), c.at("words").get<std::string>());
    }
    ASSERT_GT(cases.size(), 1000u);

    // The chars of all expected words: split UTF-8 by lead bytes.
    std::vector<std::string> chars;
    for (const auto& [text, words] : cases) {
        for (size_t i = 0; i < words.size();) {
            size_t k = 1;
            while (i + k < words.size() && (static_cast<unsigned char>(words[i + k]) & 0xC0) == 0x80) ++k;
            if (words[i] != ' ') chars.push_back(words.substr(i, k));
            i += k;
        }
    }
    std::sort(chars.begin(), chars.end());
    chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
    std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    std::vector<std::string> names = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (const auto& c : chars) {
        vocab += c + "\n##" + c + "\n";
        names.push_back(c);
        names.push_back("##" + c);
    }
    const auto t = WordPieceTokenizer::from_vocab_text(vocab, WordPieceOptions{}, "char vocab");

    size_t pass = 0;
    for (const auto& [text, words] : cases) {
        const auto e = t.encode(text, 100000);
        ASSERT_TRUE(e.ok()) << e.message;
        std::string got;
        for (size_t i = 1; i + 1 < e.ids.size(); ++i) {
            const std::string& name = names.at(static_cast<size_t>(e.ids[i]));
            if (name.compare(0, 2, "##") == 0 && name.size() > 2) {
                got += name.substr(2);
            } else {
                if (!got.empty()) got += ' ';
                got += name;
            }
        }
        if (got != words) {
            ADD_FAILURE() << "text " << cn::test::escaped(text, 160) << "\n  reference words: " << cn::test::escaped(words, 160)
                          << "\n  ours:            " << cn::test::escaped(got, 160);
            continue;
        }
        ++pass;
    }
    std::printf("[ fixtures ] %zu of %zu normalization texts give the reference words (%zu distinct chars)\n", pass, cases.size(),
                chars.size());
    EXPECT_EQ(pass, cases.size());
}

TEST(WordPiece, EncodeIntoReusesTheBuffer) {
    std::vector<int32_t> ids;
    std::string msg;
    for (const Case& c : fixtures().cases) {
        ASSERT_EQ(tokenizer().encode_into(c.text, 256, ids, msg), Status::kOk) << c.name;
        EXPECT_EQ(ids, c.ids) << c.name;
        EXPECT_TRUE(msg.empty());
    }
}

TEST(WordPiece, EmptyAndBlankTexts) {
    const std::vector<int32_t> cls_sep = {101, 102};
    for (const std::string& s : {std::string(), std::string(" "), std::string("\t\n\r "), std::string("\0\0", 2),
                                 std::string("\xE2\x80\x8B"), std::string("\xEF\xBF\xBD")}) {
        const auto e = tokenizer().encode(s);
        ASSERT_TRUE(e.ok()) << e.message;
        EXPECT_EQ(e.ids, cls_sep) << cn::test::escaped(s, 160);
    }
}

TEST(WordPiece, Truncation) {
    std::string text;
    for (int i = 0; i < 600; ++i) text += (i % 3 ? "unbelievably " : "word, ");
    const auto full = tokenizer().encode(text, 100000);
    ASSERT_TRUE(full.ok());
    ASSERT_GT(full.ids.size(), 1000u);
    for (size_t max_length : {2u, 3u, 4u, 10u, 127u, 128u, 255u, 256u, 512u}) {
        const auto e = tokenizer().encode(text, max_length);
        ASSERT_TRUE(e.ok()) << e.message;
        ASSERT_EQ(e.ids.size(), max_length);
        EXPECT_EQ(e.ids.front(), 101);
        EXPECT_EQ(e.ids.back(), 102);
        EXPECT_TRUE(std::equal(e.ids.begin(), e.ids.end() - 1, full.ids.begin())) << max_length;
    }
    // The default max_length is sentence-transformers' 256.
    EXPECT_EQ(tokenizer().encode(text).ids.size(), 256u);
    // Short texts are not padded.
    EXPECT_EQ(tokenizer().encode("hello world", 256).ids, (std::vector<int32_t>{101, 7592, 2088, 102}));
    // A special token right at the cut.
    std::string specials;
    for (int i = 0; i < 300; ++i) specials += "[MASK]";
    const auto m = tokenizer().encode(specials, 5);
    EXPECT_EQ(m.ids, (std::vector<int32_t>{101, 103, 103, 103, 102}));
    // max_length below 2 cannot hold [CLS] [SEP].
    for (size_t bad : {0u, 1u}) {
        const auto e = tokenizer().encode("hello", bad);
        EXPECT_EQ(e.status, Status::kInvalidArgument);
        EXPECT_NE(e.message.find("max_length"), std::string::npos) << e.message;
        EXPECT_TRUE(e.ids.empty());
    }
}

TEST(WordPiece, InvalidUtf8IsAnError) {
    struct Bad {
        std::string bytes;
        size_t offset;
        const char* reason;
    };
    const std::vector<Bad> table = {
        {"\x80", 0, "unexpected continuation byte"},
        {"ab\xBF", 2, "unexpected continuation byte"},
        {"\xC3", 0, "truncated 2-byte sequence"},
        {"x\xC3y", 1, "truncated 2-byte sequence"},
        {"\xE2\x82", 0, "truncated 3-byte sequence"},
        {"\xE2", 0, "truncated 3-byte sequence"},
        {"\xE2\x82x", 0, "truncated 3-byte sequence"},
        {"\xF0\x9F\x98", 0, "truncated 4-byte sequence"},
        {"\xF0\x9F", 0, "truncated 4-byte sequence"},
        {"ok \xF0", 3, "truncated 4-byte sequence"},
        {"\xC0\xAF", 0, "overlong 2-byte sequence"},
        {"\xC1\xBF", 0, "overlong 2-byte sequence"},
        {"\xE0\x80\xAF", 0, "overlong 3-byte sequence"},
        {"\xE0\x9F\xBF", 0, "overlong 3-byte sequence"},
        {"\xF0\x80\x80\xAF", 0, "overlong 4-byte sequence"},
        {"\xF0\x8F\xBF\xBF", 0, "overlong 4-byte sequence"},
        {"\xED\xA0\x80", 0, "surrogate"},
        {"\xED\xBF\xBF", 0, "surrogate"},
        {"\xED\xA0\xBD\xED\xB8\x80", 0, "surrogate"},  // CESU-8 pair
        {"\xF4\x90\x80\x80", 0, "above U+10FFFF"},
        {"\xF5\x80\x80\x80", 0, "above U+10FFFF"},
        {"\xF7\xBF\xBF\xBF", 0, "above U+10FFFF"},
        {"\xF8\x88\x80\x80\x80", 0, "0xF8..0xFF"},
        {"\xFE", 0, "0xF8..0xFF"},
        {"\xFF", 0, "0xFF"},
        {"hello \xFF world", 6, "0xF8..0xFF"},
        {"caf\xC3\xA9 \xE9", 6, "truncated 3-byte sequence"},  // a Latin-1 byte: E9 leads a 3-byte sequence
    };
    for (const Bad& b : table) {
        const auto e = tokenizer().encode(b.bytes);
        EXPECT_EQ(e.status, Status::kInvalidArgument) << cn::test::escaped(b.bytes, 160);
        EXPECT_TRUE(e.ids.empty());
        EXPECT_NE(e.message.find("invalid UTF-8 at byte offset " + std::to_string(b.offset)), std::string::npos)
            << cn::test::escaped(b.bytes, 160) << ": " << e.message;
        EXPECT_NE(e.message.find(b.reason), std::string::npos) << cn::test::escaped(b.bytes, 160) << ": " << e.message;
    }
    // Past the truncation point still counts: the whole input is validated.
    std::string long_text;
    for (int i = 0; i < 1000; ++i) long_text += "word ";
    const auto e = tokenizer().encode(long_text + "\xFF", 256);
    EXPECT_EQ(e.status, Status::kInvalidArgument);
    // Boundaries that are valid.
    for (const std::string ok :
         {"\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF", "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF"}) {
        const auto r = tokenizer().encode(ok);
        EXPECT_TRUE(r.ok()) << cn::test::escaped(ok, 160) << ": " << r.message;
    }
}

TEST(WordPiece, VocabularyErrors) {
    cn::test::TempDir dir;
    expect_error([&] { WordPieceTokenizer::from_vocab_file(dir.file("missing.txt")); }, Status::kNotFound, "missing.txt': not found");
    expect_error([&] { WordPieceTokenizer::from_vocab_file(dir.path()); }, Status::kModelFormat, "not a regular file");
    auto load = [&](const std::string& name, const std::string& content) {
        cn::test::write_file(dir.file(name), content);
        return WordPieceTokenizer::from_vocab_file(dir.file(name));
    };
    const std::string base = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    expect_error([&] { load("empty.txt", ""); }, Status::kModelFormat, "no tokens");
    expect_error([&] { load("bad_utf8.txt", base + "ok\nbad\xFF\n"); }, Status::kModelFormat, "line 7: invalid UTF-8");
    expect_error([&] { load("dup.txt", base + "a\nb\na\n"); }, Status::kModelFormat, "line 8: duplicate token 'a'");
    expect_error([&] { load("blank.txt", base + "a\n\nb\n"); }, Status::kModelFormat, "line 7: empty token");
    expect_error([&] { load("no_unk.txt", "[PAD]\n[CLS]\n[SEP]\n[MASK]\n"); }, Status::kModelFormat,
                 "unknown token '[UNK]' is not in the vocabulary");
    expect_error([&] { load("no_mask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n"); }, Status::kModelFormat,
                 "special token '[MASK]' is not in the vocabulary");
    expect_error([&] { load("binary.txt", std::string("\x00\x01\x02\xFE\xFF", 5)); }, Status::kModelFormat, "invalid UTF-8");
    WordPieceOptions o;
    o.max_length = 1;
    expect_error([&] { WordPieceTokenizer::from_vocab_text(base, o); }, Status::kInvalidArgument, "max_length");

    // A tiny vocabulary, CRLF line ends and no final newline: greedy longest match, ## pieces, [UNK] words.
    const auto t = load("tiny.txt",
                        "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nun\r\n##believ\r\n##able\r\n"
                        "unbeliev\r\n##a\r\n##ble\r\n!\r\nab");
    EXPECT_EQ(t.vocab_size(), 13u);
    EXPECT_EQ(t.encode("Unbelievable!").ids, (std::vector<int32_t>{2, 8, 7, 11, 3}));
    EXPECT_EQ(t.encode("unbelievablex ab").ids, (std::vector<int32_t>{2, 1, 12, 3}));
    EXPECT_EQ(t.encode("abable").ids, (std::vector<int32_t>{2, 12, 7, 3}));
}

TEST(WordPiece, Options) {
    const std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncafe\ncafé\nCafé\n";
    WordPieceOptions cased;
    cased.lowercase = false;  // strip_accents unset: follows lowercase, so no stripping either
    const auto c = WordPieceTokenizer::from_vocab_text(vocab, cased);
    EXPECT_EQ(c.encode("Café café").ids, (std::vector<int32_t>{2, 7, 6, 3}));
    WordPieceOptions keep_accents;
    keep_accents.strip_accents = false;
    const auto k = WordPieceTokenizer::from_vocab_text(vocab, keep_accents);
    EXPECT_EQ(k.encode("CAFÉ Café").ids, (std::vector<int32_t>{2, 6, 6, 3}));
    const auto u = WordPieceTokenizer::from_vocab_text(vocab, WordPieceOptions{});
    EXPECT_EQ(u.encode("CAFÉ Café cafe\xCC\x81").ids, (std::vector<int32_t>{2, 5, 5, 5, 3}));
    WordPieceOptions no_specials;
    no_specials.special_tokens.clear();
    const auto n = WordPieceTokenizer::from_vocab_text(vocab, no_specials);
    EXPECT_EQ(n.encode("[MASK]").ids, (std::vector<int32_t>{2, 1, 1, 1, 3}));  // "[", "mask", "]" unknown here
    EXPECT_EQ(u.encode("[MASK]").ids, (std::vector<int32_t>{2, 4, 3}));
}

TEST(WordPiece, AsciiTableAgreesWithUnicodeTables) {
    namespace uc = cn::text::unicode;
    for (uint32_t c = 0; c < 128; ++c) {
        uint32_t out[4];
        EXPECT_EQ(uc::decompose(c, out), -1);
        EXPECT_EQ(uc::to_lower(c, out), 1);
        EXPECT_EQ(out[0], c >= 'A' && c <= 'Z' ? c + 32 : c);
        EXPECT_EQ(uc::flags(c) & (uc::kMn | uc::kNonzeroCcc | uc::kCjk), 0);
    }
    uint32_t out[4];
    EXPECT_EQ(uc::to_lower(0x130, out), 2);  // İ -> i + combining dot above
    EXPECT_EQ(out[1], 0x307u);
    EXPECT_EQ(uc::decompose(0xD55C, out), 3);  // 한 -> 3 jamo
    EXPECT_EQ(uc::decompose(0xE9, out), 1);    // é -> e (the acute is dropped by the reduced table)
    EXPECT_EQ(out[0], uint32_t('e'));
    EXPECT_EQ(uc::combining_class(0x1D165), 216);
    EXPECT_NE(uc::flags(0x4E00) & uc::kCjk, 0);
    EXPECT_NE(uc::flags(0x3000) & uc::kCleanWs, 0);
    EXPECT_NE(uc::flags(0x200B) & uc::kDrop, 0);
    EXPECT_EQ(uc::flags(0x10FFFF) & uc::kDrop, 0);  // unassigned: kept, as the reference does
}

TEST(WordPiece, RandomBytesNeverCrash) {
    std::mt19937_64 rng(12345);
    const auto& cases = fixtures().cases;
    const size_t vocab = tokenizer().vocab_size();
    std::vector<int32_t> ids;
    std::string msg, s;
    size_t ok = 0, invalid = 0;
    for (int iter = 0; iter < 100000; ++iter) {
        s.clear();
        const int kind = iter % 4;
        if (kind == 0) {  // raw random bytes
            const size_t n = rng() % 48;
            for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(rng() & 0xFF));
        } else if (kind == 1) {  // a fixture text with a few bytes flipped, cut, or inserted
            s = cases[rng() % cases.size()].text;
            if (s.size() > 400) s.resize(400);
            const int edits = 1 + static_cast<int>(rng() % 3);
            for (int k = 0; k < edits && !s.empty(); ++k) {
                const size_t at = rng() % s.size();
                switch (rng() % 3) {
                    case 0: s[at] = static_cast<char>(rng() & 0xFF); break;
                    case 1: s.resize(at); break;
                    default: s.insert(s.begin() + static_cast<long>(at), static_cast<char>(rng() & 0xFF));
                }
            }
        } else {  // valid UTF-8 from random code points, biased to interesting ranges and ASCII
            const size_t n = 1 + rng() % 24;
            for (size_t i = 0; i < n; ++i) {
                uint32_t cp;
                switch (rng() % 5) {
                    case 0: cp = static_cast<uint32_t>(rng() % 0x80); break;
                    case 1: cp = 0x300 + static_cast<uint32_t>(rng() % 0x70); break;  // combining marks
                    case 2: cp = static_cast<uint32_t>(rng() % 0x3000); break;
                    case 3: cp = static_cast<uint32_t>(rng() % 0x10000); break;
                    default: cp = static_cast<uint32_t>(rng() % 0x110000);
                }
                if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
                if (cp < 0x80) {
                    s.push_back(static_cast<char>(cp));
                } else if (cp < 0x800) {
                    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
                    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
                } else if (cp < 0x10000) {
                    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
                    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
                    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
                } else {
                    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
                    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
                    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
                    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
                }
            }
        }
        const size_t max_length = 2 + rng() % 40;
        const Status st = tokenizer().encode_into(s, max_length, ids, msg);
        if (st == Status::kOk) {
            ++ok;
            ASSERT_GE(ids.size(), 2u);
            ASSERT_LE(ids.size(), max_length);
            ASSERT_EQ(ids.front(), 101);
            ASSERT_EQ(ids.back(), 102);
            for (int32_t id : ids) ASSERT_TRUE(id >= 0 && static_cast<size_t>(id) < vocab);
        } else {
            ++invalid;
            ASSERT_EQ(st, Status::kInvalidArgument) << msg;
            ASSERT_TRUE(ids.empty());
            ASSERT_NE(msg.find("invalid UTF-8"), std::string::npos) << msg;
            ASSERT_LT(kind, 2) << "valid UTF-8 rejected: " << cn::test::escaped(s, 160) << ": " << msg;
        }
    }
    std::printf("[ fuzz     ] 100000 inputs: %zu tokenized, %zu rejected as invalid UTF-8\n", ok, invalid);
}

TEST(WordPiece, ConcurrentEncodeIsSafe) {
    const auto& cases = fixtures().cases;
    std::atomic<size_t> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int rep = 0; rep < 5; ++rep) {
                for (size_t i = static_cast<size_t>(t); i < cases.size(); i += 2) {
                    if (tokenizer().encode(cases[i].text, 256).ids != cases[i].ids) ++mismatches;
                }
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0u);
}

TEST(WordPiece, Timing) {
    // Printed, not asserted.
    const auto& t = tokenizer();
    struct Sample {
        const char* what;
        std::string text;
    };
    std::string long_text;
    for (int i = 0; i < 200; ++i) long_text += "The quick brown fox jumps over the lazy dog. ";
    const std::vector<Sample> samples = {
        {"short ASCII prompt", "a watercolor painting of a red fox in the snow, highly detailed, 4k"},
        {"short accented prompt", "Crème brûlée à la carte, café naïve résumé, São Paulo"},
        {"short CJK prompt", "今天天气很好，我们去公园散步吧。"},
        {"9 KB ASCII text (truncated to 256)", long_text},
    };
    std::vector<int32_t> ids;
    std::string msg;
    for (const Sample& s : samples) {
        const int reps = 20000;
        for (int i = 0; i < 200; ++i) t.encode_into(s.text, 256, ids, msg);  // warm up
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) t.encode_into(s.text, 256, ids, msg);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        std::printf("[ timing   ] %-36s %4zu bytes -> %3zu ids: %.2f us per encode_into\n", s.what, s.text.size(), ids.size(), us / reps);
        const auto t1 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) {
            const auto e = t.encode(s.text);
            ASSERT_TRUE(e.ok());
        }
        const double us2 = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
        std::printf("[ timing   ] %-36s %.2f us per encode (fresh Encoding)\n", "", us2 / reps);
    }
}
