#include "core/format/json_strict.h"

#include <vector>

#include "core/common/status.h"

namespace cn::format {
namespace {

using json = nlohmann::json;

// A SAX handler that builds the DOM itself so it can refuse duplicate keys (nlohmann's own DOM parser
// silently keeps the last one) and runaway nesting before they cost memory.
class StrictBuilder : public nlohmann::json_sax<json> {
public:
    explicit StrictBuilder(size_t max_depth) : max_depth_(max_depth) {}

    json& root() { return root_; }
    const std::string& problem() const { return problem_; }

    bool null() override { return put(json(nullptr)); }
    bool boolean(bool v) override { return put(json(v)); }
    bool number_integer(number_integer_t v) override { return put(json(v)); }
    bool number_unsigned(number_unsigned_t v) override { return put(json(v)); }
    bool number_float(number_float_t v, const string_t&) override { return put(json(v)); }
    bool string(string_t& v) override { return put(json(std::move(v))); }
    bool binary(binary_t&) override { return refuse("binary values are not JSON"); }

    bool start_object(std::size_t) override { return open(json::object()); }
    bool end_object() override { return close(); }
    bool start_array(std::size_t) override { return open(json::array()); }
    bool end_array() override { return close(); }

    bool key(string_t& k) override {
        json* obj = stack_.back();
        if (obj->contains(k)) return refuse("duplicate key \"" + k + "\"");
        key_ = std::move(k);
        return true;
    }

    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
        if (problem_.empty()) problem_ = "syntax error at byte " + std::to_string(position) + ": " + ex.what();
        return false;
    }

private:
    // Inserts a value where the parser currently is; returns where it went.
    json* insert(json&& v) {
        if (stack_.empty()) {
            root_ = std::move(v);
            return &root_;
        }
        json* parent = stack_.back();
        if (parent->is_array()) {
            parent->push_back(std::move(v));
            return &parent->back();
        }
        auto& slot = (*parent)[key_];
        slot = std::move(v);
        return &slot;
    }
    bool put(json&& v) {
        insert(std::move(v));
        return true;
    }
    bool open(json&& container) {
        if (stack_.size() >= max_depth_) return refuse("nesting deeper than " + std::to_string(max_depth_));
        stack_.push_back(insert(std::move(container)));
        return true;
    }
    bool close() {
        stack_.pop_back();
        return true;
    }
    bool refuse(std::string why) {
        if (problem_.empty()) problem_ = std::move(why);
        return false;
    }

    size_t max_depth_;
    json root_;
    std::vector<json*> stack_;
    std::string key_;
    std::string problem_;
};

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, std::string_view what, const JsonLimits& limits) {
    if (text.size() > limits.max_bytes) {
        fail(Status::kModelFormat, std::string(what) + ": JSON of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                                       std::to_string(limits.max_bytes));
    }
    StrictBuilder builder(limits.max_depth);
    bool ok = false;
    try {
        ok = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, /*strict=*/true,
                             /*ignore_comments=*/false);
    } catch (const std::exception& e) {  // nlohmann throws for some malformed UTF-8 paths
        fail(Status::kModelFormat, std::string(what) + ": invalid JSON: " + e.what());
    }
    if (!ok) {
        const std::string why = builder.problem().empty() ? "invalid JSON" : builder.problem();
        fail(Status::kModelFormat, std::string(what) + ": " + why);
    }
    return std::move(builder.root());
}

}  // namespace cn::format
