// config.json parsing: strict JSON, typed accessors and messages that name the file and the field; the
// Chronos-2 schema on top of it.
#include <gtest/gtest.h>

#include "core/common/status.h"
#include "core/format/json_strict.h"
#include "core/format/model_config.h"
#include "core/models/chronos2/chronos2_config.h"
#include "tests/support/fixtures.h"

using cn::Status;
using cn::format::ModelConfig;

namespace {

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

TEST(StrictJson, RejectsWhatRfc8259Rejects) {
    using cn::format::parse_json_strict;
    EXPECT_EQ(parse_json_strict(R"({"a":[1,2.5,"x",null,true]})", "j")["a"][1].get<double>(), 2.5);
    expect_error([] { parse_json_strict(R"({"a":1,"a":2})", "j.json"); }, Status::kModelFormat, "j.json: duplicate key \"a\"");
    expect_error([] { parse_json_strict(R"({"a":{"b":1,"b":1}})", "j"); }, Status::kModelFormat, "duplicate key \"b\"");
    expect_error([] { parse_json_strict(R"({"a":NaN})", "j"); }, Status::kModelFormat, "syntax error");
    expect_error([] { parse_json_strict(R"({"a":Infinity})", "j"); }, Status::kModelFormat, "syntax error");
    expect_error([] { parse_json_strict("{\"a\":1,}", "j"); }, Status::kModelFormat, "syntax error");
    expect_error([] { parse_json_strict("{\"a\":1} // c", "j"); }, Status::kModelFormat, "syntax error");
    expect_error([] { parse_json_strict(std::string(100, '['), "j", {1000, 64}); }, Status::kModelFormat, "nesting deeper than 64");
    expect_error([] { parse_json_strict(std::string(2000, ' '), "j", {1000, 64}); }, Status::kModelFormat, "exceeds the limit of 1000");
    // Same key in sibling objects is fine.
    EXPECT_NO_THROW(parse_json_strict(R"([{"a":1},{"a":2}])", "j"));
}

TEST(ModelConfig, TypedAccessorsNameFileAndField) {
    const auto c = ModelConfig::parse(
        R"({"d_model": 768, "eps": 1e-6, "flag": true, "name": "x", "f": 3.5, "big": 99999999999999999999,
            "nested": {"q": [0.1, 0.5, 0.9], "k": 4}})",
        "dir/config.json");
    EXPECT_EQ(c.get_int("d_model", 1, 4096), 768);
    EXPECT_EQ(c.get_int("missing", 1, 10, 7), 7);
    EXPECT_EQ(c.get_int("nested.k", 1, 10), 4);
    EXPECT_DOUBLE_EQ(c.get_double("eps", 0, 1), 1e-6);
    EXPECT_DOUBLE_EQ(c.get_double("d_model", 0, 1e6), 768.0);  // integers are numbers
    EXPECT_TRUE(c.get_bool("flag"));
    EXPECT_EQ(c.get_string("name"), "x");
    EXPECT_EQ(c.get_double_array("nested.q", 0, 1, 1, 8).size(), 3u);
    expect_error([&] { c.get_int("f", 0, 10); }, Status::kModelFormat, "dir/config.json: field 'f': expected an integer, got 3.5");
    expect_error([&] { c.get_int("d_model", 1, 512); }, Status::kModelFormat, "field 'd_model': expected an integer in [1, 512], got 768");
    expect_error([&] { c.get_int("big", 0, 10); }, Status::kModelFormat, "field 'big'");
    expect_error([&] { c.get_int("absent", 0, 10); }, Status::kModelFormat, "field 'absent': missing");
    expect_error([&] { c.get_string("d_model"); }, Status::kModelFormat, "field 'd_model': expected a string");
    expect_error([&] { c.get_bool("name"); }, Status::kModelFormat, "field 'name': expected true or false");
    expect_error([&] { c.get_double_array("nested.q", 0.2, 1, 1, 8); }, Status::kModelFormat, "field 'nested.q[0]': out of range");
    expect_error([&] { c.get_double_array("nested.q", 0, 1, 4, 8); }, Status::kModelFormat, "expected 4..8 entries, got 3");
}

TEST(ModelConfig, LoadErrors) {
    cn::test::TempDir d;
    expect_error([&] { ModelConfig::load(d.path()); }, Status::kNotFound, "config.json: no such file");
    cn::test::write_file(d.file("config.json"), "[1]");
    expect_error([&] { ModelConfig::load(d.path()); }, Status::kModelFormat, "config.json: not a JSON object");
    cn::test::write_file(d.file("config.json"), "{\"a\": ");
    expect_error([&] { ModelConfig::load(d.path()); }, Status::kModelFormat, "config.json: syntax error");
}

TEST(Chronos2Config, ParsesTheTestConfig) {
    cn::test::Chronos2Dims dims;
    const auto c = cn::chronos2::parse_chronos2_config(ModelConfig::parse(cn::test::chronos2_config_json(dims), "c.json"));
    EXPECT_EQ(c.d_model, 8);
    EXPECT_EQ(c.inner_dim(), 8);
    EXPECT_EQ(c.patch_size, 4);
    EXPECT_EQ(c.native_horizon(), 16);
    EXPECT_DOUBLE_EQ(c.time_encoding_scale, 64.0);  // defaults to context_length
    EXPECT_TRUE(c.use_arcsinh);
    EXPECT_EQ(c.quantiles.size(), 3u);
}

TEST(Chronos2Config, RejectsBadValuesNamingTheField) {
    struct Edit {
        const char* from;
        const char* to;
        Status status;
        const char* message;
    };
    const std::vector<Edit> edits = {
        {"\"d_model\": 8", "\"d_model\": 0", Status::kModelFormat, "field 'd_model': expected an integer in [1, 65536], got 0"},
        {"\"d_model\": 8", "\"d_model\": 8.0", Status::kModelFormat, "field 'd_model': expected an integer"},
        {"\"num_layers\": 2", "\"num_layers\": 100000", Status::kModelFormat, "field 'num_layers'"},
        {"\"d_kv\": 4", "\"d_kv\": 3", Status::kModelFormat, "field 'd_kv': must be even"},
        {"\"output_patch_size\": 4", "\"output_patch_size\": 8", Status::kModelFormat, "must equal input_patch_size"},
        {"\"input_patch_stride\": 4", "\"input_patch_stride\": 2", Status::kUnsupported, "overlapping patches"},
        {"\"use_reg_token\": true", "\"use_reg_token\": false", Status::kUnsupported, "use_reg_token"},
        {"\"feed_forward_proj\": \"relu\"", "\"feed_forward_proj\": \"gated-gelu\"", Status::kUnsupported, "feed_forward_proj"},
        {"[0.100000, 0.500000, 0.900000]", "[0.5, 0.1]", Status::kModelFormat, "quantiles[1]': quantiles must be strictly increasing"},
        {"[0.100000, 0.500000, 0.900000]", "[0.0, 0.5]", Status::kModelFormat, "quantiles[0]': must lie in (0, 1)"},
        {"[0.100000, 0.500000, 0.900000]", "[]", Status::kModelFormat, "expected 1..1024 entries"},
        {"\"context_length\": 64", "\"context_length\": -5", Status::kModelFormat, "chronos_config.context_length"},
    };
    for (const auto& e : edits) {
        SCOPED_TRACE(e.to);
        std::string text = cn::test::chronos2_config_json({});
        const size_t at = text.find(e.from);
        ASSERT_NE(at, std::string::npos) << e.from;
        text.replace(at, std::strlen(e.from), e.to);
        expect_error([&] { cn::chronos2::parse_chronos2_config(ModelConfig::parse(text, "c.json")); }, e.status, e.message);
    }
}
