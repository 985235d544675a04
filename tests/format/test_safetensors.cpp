// The corrupt-safetensors table: each hand-made file must be refused with its exact status and a message
// that says what is wrong. Plus the positive cases the format allows.
#include <gtest/gtest.h>

#include "core/common/status.h"
#include "core/format/checkpoint.h"
#include "core/format/safetensors.h"
#include "core/format/shard_index.h"
#include "tests/support/fixtures.h"

using cn::Status;
using cn::format::parse_safetensors;
using cn::test::safetensors_raw;

namespace {

struct Case {
    const char* name;
    std::string bytes;
    Status status;
    const char* message;  // substring the message must contain
};

std::string u64(uint64_t v) {
    std::string s(8, '\0');
    std::memcpy(s.data(), &v, 8);
    return s;
}

std::string f32_bytes(size_t n) { return std::string(n * 4, '\x01'); }

std::vector<Case> corrupt_cases() {
    const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
    return {
        {"empty file", "", Status::kModelFormat, "too short"},
        {"truncated length prefix", std::string("\x10\x00\x00", 3), Status::kModelFormat, "too short"},
        {"huge header length", u64(uint64_t{1} << 62) + "{}", Status::kModelFormat, "exceeds the limit"},
        {"header length max u64", u64(~uint64_t{0}) + "{}", Status::kModelFormat, "exceeds the limit"},
        {"header past end of file", u64(64) + "{}", Status::kModelFormat, "runs past the end"},
        {"header not an object", safetensors_raw("[1,2]   ", ""), Status::kModelFormat, "does not start with '{'"},
        {"bad JSON", safetensors_raw("{\"a\":", ""), Status::kModelFormat, "syntax error"},
        {"JSON with NaN", safetensors_raw(R"({"__metadata__":{"x":NaN}})", ""), Status::kModelFormat, "syntax error"},
        {"trailing garbage after JSON", safetensors_raw("{} x", ""), Status::kModelFormat, "syntax error"},
        {"duplicate tensor names", safetensors_raw("{" + ok_entry + "," + ok_entry + "}", f32_bytes(2)), Status::kModelFormat,
         "duplicate key \"a\""},
        {"unknown dtype", safetensors_raw(R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", std::string(16, 'x')),
         Status::kModelFormat, "unsupported dtype \"F128\""},
        {"wrong dtype size", safetensors_raw(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,6]}})", std::string(6, 'x')),
         Status::kModelFormat, "span 6 bytes but F32 shape needs 12"},
        {"bf16 size mismatch", safetensors_raw(R"({"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,16]}})", std::string(16, 'x')),
         Status::kModelFormat, "needs 8"},
        {"offsets out of range", safetensors_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32_bytes(1)),
         Status::kModelFormat, "truncated file"},
        {"offsets end before begin", safetensors_raw(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", ""), Status::kModelFormat,
         "end < begin"},
        {"overlapping tensors",
         safetensors_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         f32_bytes(3)),
         Status::kModelFormat, "(overlap)"},
        {"hole between tensors",
         safetensors_raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                         f32_bytes(3)),
         Status::kModelFormat, "(hole)"},
        {"trailing bytes after data", safetensors_raw("{" + ok_entry + "}", f32_bytes(3)), Status::kModelFormat, "(trailing bytes)"},
        {"negative dimension", safetensors_raw(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""), Status::kModelFormat,
         "negative dimension"},
        {"float dimension", safetensors_raw(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", f32_bytes(1)),
         Status::kModelFormat, "must be integers"},
        {"dimension over 2^40", safetensors_raw(R"({"a":{"dtype":"U8","shape":[1099511627777],"data_offsets":[0,0]}})", ""),
         Status::kModelFormat, "exceeds 2^40"},
        {"element count overflow",
         safetensors_raw(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})", ""), Status::kModelFormat,
         "overflows"},
        {"rank too high", safetensors_raw(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", f32_bytes(1)),
         Status::kModelFormat, "rank 9 exceeds 8"},
        {"negative offset", safetensors_raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", ""), Status::kModelFormat,
         "non-negative integers"},
        {"offsets not a pair", safetensors_raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", f32_bytes(1)),
         Status::kModelFormat, "must be [begin, end]"},
        {"missing dtype", safetensors_raw(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", f32_bytes(1)), Status::kModelFormat,
         "missing or non-string \"dtype\""},
        {"unknown field", safetensors_raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", f32_bytes(1)),
         Status::kModelFormat, "unknown field \"x\""},
        {"entry not an object", safetensors_raw(R"({"a":3})", ""), Status::kModelFormat, "entry is not an object"},
        {"metadata not strings", safetensors_raw(R"({"__metadata__":{"format":1}})", ""), Status::kModelFormat,
         "__metadata__ value of \"format\" is not a string"},
        {"metadata not an object", safetensors_raw(R"({"__metadata__":[]})", ""), Status::kModelFormat, "__metadata__ is not an object"},
        {"deep nesting", safetensors_raw("{\"__metadata__\":" + std::string(200, '[') + std::string(200, ']') + "}", ""),
         Status::kModelFormat, "nesting deeper"},
        {"empty tensor name", safetensors_raw(R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32_bytes(1)),
         Status::kModelFormat, "empty name"},
        {"invalid UTF-8 in JSON", safetensors_raw("{\"\xff\xfe\":1}", ""), Status::kModelFormat, "syntax error"},
    };
}

}  // namespace

TEST(SafetensorsCorrupt, EachFileGetsItsExactStatus) {
    for (const auto& c : corrupt_cases()) {
        SCOPED_TRACE(c.name);
        try {
            parse_safetensors(reinterpret_cast<const uint8_t*>(c.bytes.data()), c.bytes.size(), "t.safetensors");
            ADD_FAILURE() << "accepted a corrupt file: " << c.name;
        } catch (const cn::Error& e) {
            EXPECT_EQ(e.status(), c.status);
            EXPECT_NE(e.message().find(c.message), std::string::npos) << "message: " << e.message();
            EXPECT_EQ(e.message().rfind("t.safetensors: ", 0), 0u) << "message must name the file: " << e.message();
        }
    }
}

TEST(Safetensors, ParsesValidFileWithMetadataPaddingAndZeroSizedTensor) {
    const std::string header =
        R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
        R"("z":{"dtype":"F32","shape":[0,4],"data_offsets":[12,12]},"b":{"dtype":"I64","shape":[],"data_offsets":[12,20]}}    )";
    const std::string bytes = safetensors_raw(header, std::string(20, '\0'));
    const auto h = parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "ok");
    ASSERT_EQ(h.tensors.size(), 3u);
    EXPECT_EQ(h.metadata.at("format"), "pt");
    EXPECT_EQ(h.data_offset, 8 + header.size());
    EXPECT_EQ(h.tensors[0].name, "w");
    EXPECT_EQ(h.tensors[0].dtype, cn::format::DType::kBF16);
    EXPECT_EQ(h.tensors[0].shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(h.tensors[0].numel, 6u);
    EXPECT_EQ(h.tensors[2].name, "b");  // sorted by offset: z (12,12) before b (12,20)
    EXPECT_TRUE(h.tensors[2].shape.empty());
    EXPECT_EQ(h.tensors[2].numel, 1u);
}

TEST(Safetensors, EmptyHeaderObjectIsValid) {
    const std::string bytes = safetensors_raw("{}", "");
    const auto h = parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "e");
    EXPECT_TRUE(h.tensors.empty());
}

// ---- directory level: single file and sharded checkpoints ----

namespace {

void expect_open_fails(const std::string& dir, Status status, const std::string& needle) {
    try {
        cn::format::Checkpoint::open(dir);
        ADD_FAILURE() << "opened a bad checkpoint";
    } catch (const cn::Error& e) {
        EXPECT_EQ(e.status(), status) << e.message();
        EXPECT_NE(e.message().find(needle), std::string::npos) << "message: " << e.message();
    }
}

std::string index_json(const std::string& weight_map) { return R"({"metadata":{"total_size":16},"weight_map":{)" + weight_map + "}}"; }

}  // namespace

TEST(Checkpoint, MissingDirectoryAndMissingFileAreNotFound) {
    expect_open_fails("/nonexistent/cutenative/dir", Status::kNotFound, "no such directory");
    cn::test::TempDir d;
    expect_open_fails(d.path(), Status::kNotFound, "neither model.safetensors nor model.safetensors.index.json");
}

TEST(Checkpoint, CorruptSingleFileNamesTheFile) {
    cn::test::TempDir d;
    cn::test::write_file(d.file("model.safetensors"), u64(1000) + "{}");
    expect_open_fails(d.path(), Status::kModelFormat, d.file("model.safetensors") + ": header length 1000 runs past");
}

TEST(Checkpoint, ShardedCheckpointOpens) {
    cn::test::TempDir d;
    cn::test::write_file(d.file("model-00001-of-00002.safetensors"), cn::test::safetensors_f32({{"a", {2}, {}}}));
    cn::test::write_file(d.file("model-00002-of-00002.safetensors"), cn::test::safetensors_f32({{"b", {1, 2}, {}}}));
    cn::test::write_file(d.file("model.safetensors.index.json"),
                         index_json(R"("a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors")"));
    auto ck = cn::format::Checkpoint::open(d.path());
    ASSERT_EQ(ck->tensors().size(), 2u);
    EXPECT_EQ(ck->shards().size(), 2u);
    ASSERT_NE(ck->find("b"), nullptr);
    EXPECT_EQ(ck->find("b")->entry->shape, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(ck->find("zz"), nullptr);
}

TEST(Checkpoint, CorruptIndexTable) {
    struct IndexCase {
        const char* name;
        std::string index;
        Status status;
        const char* message;
    };
    const std::vector<IndexCase> cases = {
        {"traversal ../", index_json(R"("a":"../model.safetensors")"), Status::kModelFormat, "not a plain file name"},
        {"absolute path", index_json(R"("a":"/etc/passwd")"), Status::kModelFormat, "not a plain file name"},
        {"subdirectory", index_json(R"("a":"sub/x.safetensors")"), Status::kModelFormat, "not a plain file name"},
        {"dot-dot alone", index_json(R"("a":"..")"), Status::kModelFormat, "not a plain file name"},
        {"empty shard name", index_json(R"("a":"")"), Status::kModelFormat, "not a plain file name"},
        {"backslash", index_json(R"("a":"..\\x")"), Status::kModelFormat, "not a plain file name"},
        {"missing weight_map", R"({"metadata":{}})", Status::kModelFormat, "missing or non-object \"weight_map\""},
        {"weight_map not strings", index_json(R"("a":1)"), Status::kModelFormat, "is not a string"},
        {"empty weight_map", index_json(""), Status::kModelFormat, "empty weight_map"},
        {"duplicate key", index_json(R"("a":"s1.safetensors","a":"s1.safetensors")"), Status::kModelFormat, "duplicate key"},
        {"bad JSON", "{", Status::kModelFormat, "syntax error"},
        {"missing shard file", index_json(R"("a":"absent.safetensors")"), Status::kNotFound, "absent.safetensors: no such file"},
        {"tensor not in its shard", index_json(R"("a":"s1.safetensors","b":"s1.safetensors","q":"s1.safetensors")"), Status::kModelFormat,
         "tensor \"q\" is missing from shard s1.safetensors"},
        {"shard tensor not in index", index_json(R"("a":"s1.safetensors")"), Status::kModelFormat, "tensor \"b\" is not listed"},
        {"tensor listed under another shard", index_json(R"("a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors")"),
         Status::kModelFormat, "tensor \"b\" is listed in model.safetensors.index.json under shard s2.safetensors"},
        // s3 holds "a" too: a tensor may live in exactly one shard, the one the index names.
        {"tensor in two shards", index_json(R"("a":"s1.safetensors","b":"s1.safetensors","c":"s3.safetensors")"), Status::kModelFormat,
         "s3.safetensors: tensor \"a\" is listed in model.safetensors.index.json under shard s1"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        cn::test::TempDir d;
        cn::test::write_file(d.file("s1.safetensors"), cn::test::safetensors_f32({{"a", {2}, {}}, {"b", {1}, {}}}));
        cn::test::write_file(d.file("s2.safetensors"), cn::test::safetensors_f32({{"c", {1}, {}}}));
        cn::test::write_file(d.file("s3.safetensors"), cn::test::safetensors_f32({{"c", {1}, {}}, {"a", {2}, {}}}));
        cn::test::write_file(d.file("model.safetensors.index.json"), c.index);
        expect_open_fails(d.path(), c.status, c.message);
    }
}

TEST(ShardNames, SafeBasename) {
    using cn::format::is_safe_basename;
    EXPECT_TRUE(is_safe_basename("model-00001-of-00002.safetensors"));
    EXPECT_TRUE(is_safe_basename("..hidden"));
    EXPECT_FALSE(is_safe_basename(""));
    EXPECT_FALSE(is_safe_basename("."));
    EXPECT_FALSE(is_safe_basename(".."));
    EXPECT_FALSE(is_safe_basename("a/b"));
    EXPECT_FALSE(is_safe_basename(std::string("a\0b", 3)));
    EXPECT_FALSE(is_safe_basename(std::string(256, 'a')));
}
