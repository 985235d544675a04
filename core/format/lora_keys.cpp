#include "core/format/lora_keys.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/format/json_strict.h"

namespace cn::format {
namespace {

using std::string;
using std::string_view;

bool starts_with(string_view s, string_view p) { return s.size() >= p.size() && s.compare(0, p.size(), p) == 0; }
bool ends_with(string_view s, string_view p) { return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0; }

string underscored(string s) {
    std::replace(s.begin(), s.end(), '.', '_');
    return s;
}

string shape_str(const std::vector<int64_t>& shape) {
    string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

string in_quotes(string_view s) { return "\"" + string(s) + "\""; }

[[noreturn]] void fail_key(Status status, string_view label, string_view key, const string& what) {
    fail(status, string(label) + ": " + string(key) + ": " + what);
}

// ---- Tensors cutenative refuses rather than drop -------------------------------------------------------------------

// What the tensor is when it belongs to an adapter kind cutenative does not apply, judged by a '.'-separated
// component of its name ("lora_unet_layers_0_attention_to_q.lokr_w1", "layers.0.attention.to_q.lora_magnitude_vector").
std::optional<string> refused_kind(string_view name) {
    if (starts_with(name, "lora_te") || starts_with(name, "text_encoder")) {
        return "a text-encoder LoRA key: cutenative applies adapters to the transformer only and refuses the file rather than "
               "leave part of it out (diffusers ignores such keys)";
    }
    for (size_t pos = 0;;) {
        const size_t dot = name.find('.', pos);
        const string_view c = name.substr(pos, dot == string_view::npos ? string_view::npos : dot - pos);
        if (c == "dora_scale" || c == "lora_magnitude_vector") {
            return "a DoRA adapter (" + string(c) +
                   "): cutenative does not apply DoRA and refuses the file rather than run it as plain LoRA" +
                   (c == "dora_scale" ? " (diffusers drops dora_scale keys and does just that)" : "");
        }
        if (starts_with(c, "lokr_"))
            return "a LoKr adapter (lokr_*): cutenative does not apply LoKr and refuses the file rather than drop its keys";
        if (starts_with(c, "hada_"))
            return "a LoHa adapter (hada_*): cutenative does not apply LoHa and refuses the file rather than drop its keys";
        if (starts_with(c, "oft_") || starts_with(c, "boft_")) {
            return "an OFT/BOFT adapter: cutenative does not apply orthogonal fine-tuning and refuses the file rather than drop its keys";
        }
        if (c == "lora_mid") return "a LoCon/Tucker lora_mid factor: cutenative applies 2-D LoRA factors only and refuses the file";
        if (dot == string_view::npos) break;
        pos = dot + 1;
    }
    if (ends_with(name, ".diff") || ends_with(name, ".diff_b")) {
        return "a full weight-difference patch (.diff / .diff_b): cutenative applies low-rank factors only and refuses the file "
               "rather than drop these keys";
    }
    if (ends_with(name, ".bias") && (name.find(".lora_B.") != string_view::npos || name.find(".lora_up.") != string_view::npos ||
                                     name.find(".lora.up.") != string_view::npos)) {
        return "a LoRA bias (lora_B.bias, PEFT's lora_bias): cutenative patches weights only and refuses the file rather than drop "
               "the bias";
    }
    return std::nullopt;
}

// ---- Factor names ---------------------------------------------------------------------------------------------------

enum class Role {
    kDown,
    kUp,
    kAlpha
};
enum class Style {
    kKohya,
    kPeft,
    kPeftDefault,
    kDot,
    kBare,
    kNone
};

struct Suffix {
    string_view text;
    Role role;
    Style style;
};

constexpr Suffix kSuffixes[] = {
    {".lora_down.weight", Role::kDown, Style::kKohya},
    {".lora_up.weight", Role::kUp, Style::kKohya},
    {".lora_A.default.weight", Role::kDown, Style::kPeftDefault},
    {".lora_B.default.weight", Role::kUp, Style::kPeftDefault},
    {".lora_A.weight", Role::kDown, Style::kPeft},
    {".lora_B.weight", Role::kUp, Style::kPeft},
    {".lora.down.weight", Role::kDown, Style::kDot},
    {".lora.up.weight", Role::kUp, Style::kDot},
    {".lora_A", Role::kDown, Style::kBare},
    {".lora_B", Role::kUp, Style::kBare},
    {".alpha", Role::kAlpha, Style::kNone},
};

// Tried in order on a key: the key as written, then without one of these.
constexpr string_view kPrefixes[] = {
    "model.diffusion_model.", "diffusion_model.", "transformer.", "base_model.model.", "unet.", "lora_unet_", "lycoris_",
    "lora_transformer_"};

struct Group {  // the tensors of one module key ("stem")
    const LoraTensorInfo* down = nullptr;
    const LoraTensorInfo* up = nullptr;
    const LoraTensorInfo* alpha = nullptr;
    Style down_style = Style::kNone, up_style = Style::kNone;
};

// ---- The model's modules and every name they go by -----------------------------------------------------------------

enum class Form {
    kDiffusers,
    kUnderscored,
    kOriginal,
    kOriginalUnderscored
};

struct Part {
    size_t target;
    int64_t row_begin, rows;  // of the target
    int64_t up_row_begin;     // of the up matrix
};

struct Module {
    string path;  // the target's name without ".weight"; "B.attention.qkv" for the fused alias
    std::vector<Part> parts;
    int64_t in = 0, up_rows = 0;
    bool fused = false;
};

struct Entry {
    size_t module;
    Form form;
};

// Z-Image's original (Comfy single-file) spelling of a diffusers module path, if it has one
// (convert_z_image_transformer_checkpoint_to_diffusers run backwards).
std::optional<string> original_name(const string& p) {
    if (ends_with(p, ".attention.to_out.0")) return p.substr(0, p.size() - 8) + "out";
    if (p == "all_x_embedder.2-1") return string("x_embedder");
    if (starts_with(p, "all_final_layer.2-1.")) return "final_layer." + p.substr(20);
    return std::nullopt;
}

// The other way round, for a model that names its weights the original way.
std::optional<string> diffusers_name(const string& p) {
    if (ends_with(p, ".attention.out")) return p.substr(0, p.size() - 3) + "to_out.0";
    if (p == "x_embedder") return string("all_x_embedder.2-1");
    if (starts_with(p, "final_layer.")) return "all_final_layer.2-1." + p.substr(12);
    return std::nullopt;
}

class ModuleTable {
public:
    ModuleTable(const std::vector<LoraTargetInfo>& targets, string_view label) {
        std::map<string, size_t> by_path;
        for (size_t i = 0; i < targets.size(); ++i) {
            const LoraTargetInfo& t = targets[i];
            if (t.out <= 0 || t.in <= 0)
                fail_key(Status::kInternal, label, t.name,
                         "adapter target with shape [" + std::to_string(t.out) + ", " + std::to_string(t.in) + "]");
            const string path = ends_with(t.name, ".weight") ? t.name.substr(0, t.name.size() - 7) : t.name;
            if (path.empty() || !by_path.emplace(path, i).second) fail_key(Status::kInternal, label, t.name, "adapter target listed twice");
            const size_t m = add_module({path, {{i, 0, t.out, 0}}, t.in, t.out, false});
            add(path, m, Form::kDiffusers);
            add(underscored(path), m, Form::kUnderscored);
            if (auto o = original_name(path)) {
                add(*o, m, Form::kOriginal);
                add(underscored(*o), m, Form::kOriginalUnderscored);
            }
            if (auto d = diffusers_name(path)) {
                add(*d, m, Form::kDiffusers);
                add(underscored(*d), m, Form::kUnderscored);
            }
            // A model that stores the original fused qkv [3D, in]: diffusers' to_q, to_k, to_v are its row thirds.
            if (ends_with(path, ".attention.qkv") && t.out % 3 == 0) {
                const string block = path.substr(0, path.size() - 3);
                const int64_t d = t.out / 3;
                const char* kParts[] = {"to_q", "to_k", "to_v"};
                for (int j = 0; j < 3; ++j) {
                    const size_t mj = add_module({block + kParts[j], {{i, j * d, d, 0}}, t.in, d, false});
                    add(block + kParts[j], mj, Form::kDiffusers);
                    add(underscored(block + kParts[j]), mj, Form::kUnderscored);
                }
            }
        }
        // Original fused attention.qkv = the rows of to_q, to_k, to_v, stacked (the checkpoint converter's chunk(3)).
        for (const auto& [path, qi] : by_path) {
            if (!ends_with(path, ".attention.to_q")) continue;
            const string block = path.substr(0, path.size() - 4);  // "B.attention."
            auto k = by_path.find(block + "to_k"), v = by_path.find(block + "to_v");
            if (k == by_path.end() || v == by_path.end()) continue;
            const LoraTargetInfo &tq = targets[qi], &tk = targets[k->second], &tv = targets[v->second];
            if (tk.in != tq.in || tv.in != tq.in) continue;
            Module fused{block + "qkv",
                         {{qi, 0, tq.out, 0}, {k->second, 0, tk.out, tq.out}, {v->second, 0, tv.out, tq.out + tk.out}},
                         tq.in,
                         tq.out + tk.out + tv.out,
                         true};
            const size_t m = add_module(std::move(fused));
            add(block + "qkv", m, Form::kOriginal);
            add(underscored(block + "qkv"), m, Form::kOriginalUnderscored);
        }
    }

    const Module& module(size_t i) const { return modules_[i]; }

    // The entry `key` names, or nullptr; a key two modules claim (no Z-Image name does) is an error.
    const Entry* find(string_view key, string_view label, string_view tensor) const {
        auto c = clashes_.find(key);
        if (c != clashes_.end()) fail_key(Status::kInvalidArgument, label, tensor, "module " + in_quotes(key) + " could mean " + c->second);
        auto it = names_.find(key);
        return it == names_.end() ? nullptr : &it->second;
    }

private:
    size_t add_module(Module m) {
        modules_.push_back(std::move(m));
        return modules_.size() - 1;
    }
    void add(const string& key, size_t m, Form form) {
        auto [it, fresh] = names_.emplace(key, Entry{m, form});
        if (!fresh && it->second.module != m) clashes_[key] = modules_[it->second.module].path + " or " + modules_[m].path;
    }

    std::vector<Module> modules_;
    std::map<string, Entry, std::less<>> names_;
    std::map<string, string, std::less<>> clashes_;
};

// ---- PEFT config (lora_adapter_metadata) ----------------------------------------------------------------------------

// A rank_pattern / alpha_pattern key, matched as PEFT's get_pattern_key does: re.match(rf"(.*\.)?({key})$", module).
// Keys are module names or suffixes in practice (diffusers writes "^layers.0.attention.to_q"), so cutenative evaluates
// that subset of Python's syntax exactly, with no backtracking (time: pattern length x name length, whatever the
// pattern): a leading '^', a trailing '$', '.' (any character), ".*", "\." (a dot), "\d", "\d+" and literal
// characters. Anything else is refused, not guessed (std::regex would backtrack exponentially on hostile patterns).
class ModulePattern {
public:
    ModulePattern(const string& key, const string& where) : key_(key) {
        size_t i = 0;
        if (!key.empty() && key[0] == '^') {
            anchored_ = true;
            i = 1;
        }
        for (; i < key.size(); ++i) {
            const char c = key[i];
            if (c == '$' && i + 1 == key.size()) break;
            if (c == '.') {
                const bool seq = i + 1 < key.size() && key[i + 1] == '*';
                toks_.push_back({seq ? Tok::kAnySeq : Tok::kAny, 0});
                i += seq;
            } else if (c == '\\' && i + 1 < key.size() && (key[i + 1] == '.' || key[i + 1] == '_' || key[i + 1] == '-')) {
                toks_.push_back({Tok::kLit, key[++i]});
            } else if (c == '\\' && i + 1 < key.size() && key[i + 1] == 'd') {
                const bool more = i + 2 < key.size() && key[i + 2] == '+';
                toks_.push_back({more ? Tok::kDigits : Tok::kDigit, 0});
                i += 1 + more;
            } else if (string_view("\\^$|?*+()[]{}").find(c) != string_view::npos) {
                fail(Status::kUnsupported, where + ": pattern " + in_quotes(key) +
                                               " uses regular-expression syntax cutenative does not evaluate (it takes module names "
                                               "and suffixes: '^', '$', '.', \".*\", \"\\.\", \"\\d\", \"\\d+\")");
            } else {
                toks_.push_back({Tok::kLit, c});
            }
        }
    }

    const string& key() const { return key_; }

    bool matches(string_view name) const {
        // Positions where the key's part may start: 0, or just after a '.' ("(.*\.)?"); only 0 when anchored.
        std::vector<char> at(name.size() + 1, 0), next(name.size() + 1);
        for (size_t s = 0; s <= name.size(); ++s) at[s] = s == 0 || (!anchored_ && name[s - 1] == '.');
        for (const Tok& t : toks_) {
            std::fill(next.begin(), next.end(), 0);
            bool any = false;
            for (size_t p = 0; p <= name.size(); ++p) {
                if (!at[p]) continue;
                switch (t.kind) {
                    case Tok::kLit: next[p + 1] |= p < name.size() && name[p] == t.c; break;
                    case Tok::kAny: next[p + 1] |= p < name.size() && name[p] != '\n'; break;
                    case Tok::kDigit: next[p + 1] |= p < name.size() && is_digit(name[p]); break;
                    case Tok::kAnySeq:
                        for (size_t q = p; q <= name.size() && !next[q]; ++q) {
                            next[q] = 1;
                            if (q < name.size() && name[q] == '\n') break;
                        }
                        break;
                    case Tok::kDigits:
                        for (size_t q = p; q < name.size() && is_digit(name[q]); ++q) next[q + 1] = 1;
                        break;
                }
            }
            for (char c : next) any |= c != 0;
            if (!any) return false;
            at.swap(next);
        }
        return at[name.size()] != 0;
    }

private:
    struct Tok {
        enum Kind {
            kLit,
            kAny,
            kAnySeq,
            kDigit,
            kDigits
        } kind;
        char c;
    };
    static bool is_digit(char c) { return c >= '0' && c <= '9'; }

    string key_;
    bool anchored_ = false;
    std::vector<Tok> toks_;
};

struct PeftConfig {
    bool present = false;
    int64_t r = 8;  // LoraConfig's defaults
    double lora_alpha = 8;
    bool rslora = false;
    std::vector<std::pair<ModulePattern, int64_t>> rank_pattern;
    std::vector<std::pair<ModulePattern, double>> alpha_pattern;

    int64_t rank_of(string_view module) const {
        for (const auto& [p, v] : rank_pattern) {
            if (p.matches(module)) return v;
        }
        return r;
    }
    double alpha_of(string_view module) const {
        for (const auto& [p, v] : alpha_pattern) {
            if (p.matches(module)) return v;
        }
        return lora_alpha;
    }
};

int64_t positive_int(const nlohmann::ordered_json& v, const string& what) {
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 31)) {
        fail(Status::kModelFormat, what + " must be a positive integer, not " + v.dump());
    }
    return v.get<int64_t>();
}

double finite_number(const nlohmann::ordered_json& v, const string& what) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(Status::kModelFormat, what + " must be a number, not " + v.dump());
    return v.get<double>();
}

template <class T, class F>
std::vector<std::pair<ModulePattern, T>> patterns(const nlohmann::ordered_json& v, const string& what, F value) {
    std::vector<std::pair<ModulePattern, T>> out;
    if (v.is_null()) return out;
    if (!v.is_object()) fail(Status::kModelFormat, what + " must be an object");
    if (v.size() > kMaxLoraPatternEntries) {
        fail(Status::kModelFormat,
             what + " has " + std::to_string(v.size()) + " entries; the limit is " + std::to_string(kMaxLoraPatternEntries));
    }
    for (const auto& [k, x] : v.items()) {
        if (k.size() > kMaxLoraPatternBytes) {
            fail(Status::kModelFormat, what + ": a pattern of " + std::to_string(k.size()) + " bytes exceeds the limit of " +
                                           std::to_string(kMaxLoraPatternBytes));
        }
        out.emplace_back(ModulePattern(k, what), value(x, what + "[" + in_quotes(k) + "]"));
    }
    return out;
}

PeftConfig parse_peft_config(const std::map<string, string>& metadata, string_view label) {
    PeftConfig cfg;
    auto it = metadata.find("lora_adapter_metadata");
    if (it == metadata.end()) return cfg;
    const string what = string(label) + ": lora_adapter_metadata";
    (void)parse_json_strict(it->second, what, JsonLimits{16u * 1000u * 1000u, 16});  // RFC 8259, no duplicate keys
    // Again, keeping the file's order of keys: PEFT takes the first pattern that matches, in dict (= file) order.
    const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(it->second);
    if (!doc.is_object()) fail(Status::kModelFormat, what + ": not a JSON object");
    // diffusers' pipelines write the transformer's LoraConfig under "transformer." (_pack_dict_with_prefix) and load
    // only those fields; a model's save_lora_adapter writes them unprefixed.
    string prefix;
    for (const auto& [k, v] : doc.items()) {
        if (starts_with(k, "transformer.")) prefix = "transformer.";
    }
    auto field = [&](const char* name) -> const nlohmann::ordered_json* {
        auto f = doc.find(prefix + name);
        return f == doc.end() || f->is_null() ? nullptr : &*f;
    };
    auto where = [&](const char* name) { return what + ": " + in_quotes(prefix + name); };
    if (auto* v = field("use_dora"); v && (!v->is_boolean() || v->get<bool>())) {
        fail(Status::kUnsupported, what + ": " + in_quotes(prefix + "use_dora") +
                                       " is set: a DoRA adapter; cutenative does not apply DoRA and refuses the file rather than run it "
                                       "as plain LoRA");
    }
    const char* kScaleFields[] = {"r", "lora_alpha", "rank_pattern", "alpha_pattern", "use_rslora"};
    for (const char* f : kScaleFields) cfg.present |= field(f) != nullptr;
    if (!cfg.present) return cfg;  // e.g. only another component's config: nothing scales the transformer
    if (auto* v = field("r")) cfg.r = positive_int(*v, where("r"));
    if (auto* v = field("lora_alpha")) cfg.lora_alpha = finite_number(*v, where("lora_alpha"));
    if (auto* v = field("use_rslora")) {
        if (!v->is_boolean()) fail(Status::kModelFormat, where("use_rslora") + " must be true or false, not " + v->dump());
        cfg.rslora = v->get<bool>();
    }
    if (auto* v = field("rank_pattern")) cfg.rank_pattern = patterns<int64_t>(*v, where("rank_pattern"), positive_int);
    if (auto* v = field("alpha_pattern")) cfg.alpha_pattern = patterns<double>(*v, where("alpha_pattern"), finite_number);
    return cfg;
}

// ---- Checks on one module's tensors ---------------------------------------------------------------------------------

bool is_float_factor(DType t) { return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32 || t == DType::kF64; }

void check_factor_dtype(const LoraTensorInfo& t, string_view label) {
    if (!is_float_factor(t.dtype)) {
        fail_key(Status::kUnsupported, label, t.name,
                 string("factor of dtype ") + dtype_name(t.dtype) + ": cutenative reads F16, BF16, F32 and F64 LoRA factors");
    }
}

// The kohya alpha's value; nullopt without one.
std::optional<double> alpha_value(const Group& g, string_view label) {
    if (!g.alpha) return std::nullopt;
    const LoraTensorInfo& a = *g.alpha;
    int64_t n = 1;
    for (int64_t d : a.shape) n = d == 1 ? n : 0;
    if (n != 1)
        fail_key(Status::kInvalidArgument, label, a.name, "an alpha must hold one number; this one has shape " + shape_str(a.shape));
    if (!a.scalar) fail_key(Status::kInvalidArgument, label, a.name, "the alpha's value was not read");
    if (!std::isfinite(*a.scalar)) fail_key(Status::kInvalidArgument, label, a.name, "alpha is not finite");
    return *a.scalar;
}

// The family a file's keys say it comes from (for logs).
struct FamilyVotes {
    std::set<string> prefixes;
    std::set<Style> styles;
    bool underscored = false, original = false, fused = false;

    string family() const {
        const bool kohya_prefix = prefixes.count("lora_unet_") || prefixes.count("lora_transformer_");
        if (underscored || kohya_prefix) {
            if (fused) return "kohya-comfy-fused-qkv";
            if (original) return "kohya-comfy";
            return prefixes.count("lycoris_") && prefixes.size() == 1 ? "lycoris" : "kohya";
        }
        if (original) return "original-names";
        if (styles.count(Style::kDot)) return "kohya-dot";
        if (prefixes.size() > 1) return "mixed";
        const string p = prefixes.empty() ? "" : *prefixes.begin();
        if (styles.count(Style::kKohya)) return "kohya";
        if (styles.count(Style::kPeftDefault)) return p.empty() ? "diffsynth" : "peft";
        if (p == "diffusion_model.") return "ai-toolkit";
        if (p == "model.diffusion_model.") return "comfy";
        if (p == "base_model.model.") return "peft";
        return "diffusers/peft";
    }
};

}  // namespace

LoraPlan plan_lora(const std::vector<LoraTensorInfo>& tensors, const std::map<string, string>& metadata,
                   const std::vector<LoraTargetInfo>& targets, string_view label) {
    // Names in sorted order, so the error a file gets does not depend on the order of its header.
    std::vector<const LoraTensorInfo*> sorted;
    sorted.reserve(tensors.size());
    for (const auto& t : tensors) sorted.push_back(&t);
    std::sort(sorted.begin(), sorted.end(), [](const LoraTensorInfo* a, const LoraTensorInfo* b) { return a->name < b->name; });
    // Refusals first: a DoRA or LoKr file is reported as one, whatever else is wrong with it.
    for (const LoraTensorInfo* t : sorted) {
        if (auto kind = refused_kind(t->name)) fail_key(Status::kUnsupported, label, t->name, *kind);
    }
    const PeftConfig peft = parse_peft_config(metadata, label);

    std::map<string, Group> groups;  // by module key as written in the file
    for (const LoraTensorInfo* t : sorted) {
        const Suffix* sfx = nullptr;
        for (const Suffix& s : kSuffixes) {
            if (ends_with(t->name, s.text) && t->name.size() > s.text.size()) {
                sfx = &s;
                break;
            }
        }
        if (!sfx) {
            fail_key(Status::kInvalidArgument, label, t->name,
                     "not a LoRA tensor (a module key ending in lora_down/lora_up, lora_A/lora_B, lora.down/lora.up "
                     "[.default][.weight] or alpha)");
        }
        Group& g = groups[t->name.substr(0, t->name.size() - sfx->text.size())];
        const LoraTensorInfo** slot = sfx->role == Role::kDown ? &g.down : sfx->role == Role::kUp ? &g.up : &g.alpha;
        if (*slot) fail_key(Status::kInvalidArgument, label, t->name, "the same factor as " + in_quotes((*slot)->name) + " for one module");
        *slot = t;
        if (sfx->role == Role::kDown) g.down_style = sfx->style;
        if (sfx->role == Role::kUp) g.up_style = sfx->style;
    }
    if (groups.empty()) fail(Status::kInvalidArgument, string(label) + ": holds no LoRA tensors: the adapter patches nothing");

    const ModuleTable table(targets, label);
    FamilyVotes votes;
    struct Placed {
        int64_t row_begin, rows;
        string source;
    };
    std::map<size_t, std::vector<Placed>> by_target;
    LoraPlan plan;
    for (const auto& [stem, g] : groups) {
        if (!g.down || !g.up) {
            const LoraTensorInfo* have = g.down ? g.down : g.up ? g.up : g.alpha;
            fail_key(Status::kInvalidArgument, label, have->name,
                     !g.down && !g.up ? "an alpha for module " + in_quotes(stem) + ", which has no LoRA factors"
                                      : "module " + in_quotes(stem) + " has " + (g.down ? "a down" : "an up") + " matrix but no " +
                                            (g.down ? "up" : "down") + " matrix");
        }
        if (g.down_style != g.up_style) {
            fail_key(Status::kInvalidArgument, label, g.up->name, "its down matrix " + in_quotes(g.down->name) + " follows another naming");
        }
        // The module: the key as written, else without one of the known prefixes.
        const Entry* entry = table.find(stem, label, g.down->name);
        string prefix;
        for (size_t i = 0; !entry && i < std::size(kPrefixes); ++i) {
            if (starts_with(stem, kPrefixes[i])) {
                entry = table.find(string_view(stem).substr(kPrefixes[i].size()), label, g.down->name);
                if (entry) prefix = string(kPrefixes[i]);
            }
        }
        if (!entry)
            fail_key(Status::kInvalidArgument, label, g.down->name,
                     "module " + in_quotes(stem) + " is no weight of this model that adapters patch");
        const Module& m = table.module(entry->module);
        votes.prefixes.insert(prefix);
        votes.styles.insert(g.down_style);
        votes.underscored |= entry->form == Form::kUnderscored || entry->form == Form::kOriginalUnderscored;
        votes.original |= entry->form == Form::kOriginal || entry->form == Form::kOriginalUnderscored;
        votes.fused |= m.fused;

        check_factor_dtype(*g.down, label);
        check_factor_dtype(*g.up, label);
        const std::vector<int64_t>&ds = g.down->shape, &us = g.up->shape;
        if (ds.size() != 2)
            fail_key(Status::kInvalidArgument, label, g.down->name, "a down matrix must be 2-D [rank, in], not " + shape_str(ds));
        if (us.size() != 2)
            fail_key(Status::kInvalidArgument, label, g.up->name, "an up matrix must be 2-D [out, rank], not " + shape_str(us));
        const int64_t r = ds[0];
        if (r <= 0) fail_key(Status::kInvalidArgument, label, g.down->name, "rank " + std::to_string(r) + " (shape " + shape_str(ds) + ")");
        if (ds[1] != m.in) {
            fail_key(Status::kInvalidArgument, label, g.down->name,
                     "shape " + shape_str(ds) + " does not fit " + m.path + ", which takes " + std::to_string(m.in) + " inputs");
        }
        if (us[1] != r) {
            fail_key(Status::kInvalidArgument, label, g.up->name,
                     "shape " + shape_str(us) + ": its rank differs from its down matrix's (" + shape_str(ds) + ")");
        }
        if (us[0] != m.up_rows) {
            fail_key(Status::kInvalidArgument, label, g.up->name,
                     m.fused
                         ? "shape " + shape_str(us) + ": a fused qkv up matrix needs the rows of to_q, to_k and to_v, " +
                               std::to_string(m.parts[0].rows) + " + " + std::to_string(m.parts[1].rows) + " + " +
                               std::to_string(m.parts[2].rows) + " = " + std::to_string(m.up_rows)
                         : "shape " + shape_str(us) + " does not fit " + m.path + ", which has " + std::to_string(m.up_rows) + " outputs");
        }

        const std::optional<double> alpha = alpha_value(g, label);
        for (const Part& part : m.parts) {
            const LoraTargetInfo& t = targets[part.target];
            // The module name PEFT's patterns see: diffusers' ("B.attention.to_q", also when it lands in a fused target).
            const string path = !m.fused ? m.path : ends_with(t.name, ".weight") ? t.name.substr(0, t.name.size() - 7) : t.name;
            double scale = alpha ? *alpha / static_cast<double>(r) : 1.0;
            if (peft.present) {
                const int64_t cr = peft.rank_of(path);
                if (cr != r) {
                    fail_key(Status::kInvalidArgument, label, g.down->name,
                             "lora_adapter_metadata gives " + path + " rank " + std::to_string(cr) + " but the factors have rank " +
                                 std::to_string(r));
                }
                const double a = peft.alpha_of(path);
                scale *= peft.rslora ? a / std::sqrt(static_cast<double>(cr)) : a / static_cast<double>(cr);
            }
            LoraPatch p;
            p.target = t.name;
            p.row_begin = part.row_begin;
            p.rows = part.rows;
            p.down = g.down->name;
            p.up = g.up->name;
            p.up_row_begin = part.up_row_begin;
            p.rank = r;
            p.scale = scale;
            p.source = stem;
            by_target[part.target].push_back({p.row_begin, p.rows, stem});
            plan.patches.push_back(std::move(p));
        }
    }

    // Two keys on the same rows: diffusers keeps one and drops the other (split to_q/to_k/to_v over a fused qkv,
    // to_out.0 over out), ComfyUI adds both. Which one the file's author meant is unknowable from the keys alone.
    for (auto& [ti, placed] : by_target) {
        std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
            return a.row_begin < b.row_begin || (a.row_begin == b.row_begin && a.source < b.source);
        });
        for (size_t i = 1; i < placed.size(); ++i) {
            if (placed[i].row_begin < placed[i - 1].row_begin + placed[i - 1].rows) {
                fail_key(Status::kInvalidArgument, label, placed[i].source,
                         "patches " + targets[ti].name + ", which " + in_quotes(placed[i - 1].source) +
                             " patches too (diffusers would drop one, ComfyUI would add both); cutenative refuses an adapter that "
                             "patches a weight twice");
            }
        }
    }
    std::sort(plan.patches.begin(), plan.patches.end(), [](const LoraPatch& a, const LoraPatch& b) {
        return a.target < b.target || (a.target == b.target && a.row_begin < b.row_begin);
    });
    plan.family = votes.family();
    return plan;
}

}  // namespace cn::format
