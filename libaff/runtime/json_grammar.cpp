// The schema compiler and the byte matcher (see json_grammar.hpp).
#include "libaff/runtime/json_grammar.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <set>

namespace aff {

using ojson = nlohmann::ordered_json;

namespace {

constexpr int kMaxWhitespace = 48;
constexpr std::uint32_t kMaxNumberBytes = 32;

const std::set<std::string>& ignored_keywords() {
    static const std::set<std::string> k = {"title", "description", "default", "examples", "$schema",
                                             "additionalProperties", "strict", "$comment", "$id"};
    return k;
}

bool is_ws(unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

std::uint64_t all_bits(std::size_t n) { return n >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << n) - 1; }

}  // namespace

JsonGrammar::JsonGrammar() {
    // The generic JSON value: dispatched on its first byte (JsonMatcher::start_value).
    GrammarNode lit;
    lit.kind = GrammarNode::Kind::literals;
    lit.literals = {"true", "false", "null"};
    any_literal_ = add(lit);
    GrammarNode str;
    str.kind = GrammarNode::Kind::string;
    any_string_ = add(str);
    GrammarNode num;
    num.kind = GrammarNode::Kind::number;
    any_number_ = add(num);
    GrammarNode any;
    any_value_ = add(any);
    GrammarNode obj;
    obj.kind = GrammarNode::Kind::object;
    obj.open = true;
    obj.children = {any_value_};
    any_object_ = add(obj);
    GrammarNode arr;
    arr.kind = GrammarNode::Kind::array;
    arr.items = any_value_;
    any_array_ = add(arr);
}

int JsonGrammar::add(GrammarNode n) {
    nodes_.push_back(std::move(n));
    return int(nodes_.size() - 1);
}

std::shared_ptr<const JsonGrammar> JsonGrammar::any_object() {
    auto g = std::shared_ptr<JsonGrammar>(new JsonGrammar());
    g->root_ = g->any_object_;
    return g;
}

std::shared_ptr<const JsonGrammar> JsonGrammar::from_schema(const ojson& schema) {
    auto g = std::shared_ptr<JsonGrammar>(new JsonGrammar());
    g->root_ = g->compile(schema, "schema", 0);
    return g;
}

int JsonGrammar::compile(const ojson& s, const std::string& path, int depth) {
    if (depth >= 15) throw_usage(path + ": nested deeper than 15 levels");
    if (s.is_boolean() && s.get<bool>()) return any_value_;
    if (!s.is_object()) throw_usage(path + ": expected a schema object");
    for (const auto& [key, value] : s.items()) {
        static const std::set<std::string> known = {"type", "properties", "required", "items", "enum", "const"};
        if (!known.count(key) && !ignored_keywords().count(key))
            throw_usage(path + ": the keyword '" + key + "' is not supported in structured output");
    }
    auto literal_texts = [&](const ojson& values, const std::string& where) {
        GrammarNode n;
        n.kind = GrammarNode::Kind::literals;
        for (const auto& v : values) n.literals.push_back(v.dump());
        if (n.literals.empty()) throw_usage(where + ": must not be empty");
        if (n.literals.size() > 64) throw_usage(where + ": more than 64 values");
        return n;
    };
    if (auto c = s.find("const"); c != s.end()) return add(literal_texts(ojson::array({*c}), path + ".const"));
    if (auto e = s.find("enum"); e != s.end()) {
        if (!e->is_array()) throw_usage(path + ".enum: expected an array");
        return add(literal_texts(*e, path + ".enum"));
    }
    auto t = s.find("type");
    if (t == s.end()) return any_value_;
    if (!t->is_string()) throw_usage(path + ".type: expected one type name (unions are not supported)");
    const std::string type = t->get<std::string>();
    GrammarNode n;
    if (type == "object") {
        n.kind = GrammarNode::Kind::object;
        auto props = s.find("properties");
        if (props == s.end() || props->empty()) {
            n.open = true;
            n.children = {any_value_};
        } else {
            if (!props->is_object()) throw_usage(path + ".properties: expected an object");
            if (props->size() > 64) throw_usage(path + ".properties: more than 64 properties");
            for (const auto& [name, sub] : props->items()) {
                for (char ch : name)
                    if (ch == '"' || ch == '\\' || static_cast<unsigned char>(ch) < 0x20)
                        throw_usage(path + ".properties: the key " + ojson(name).dump() +
                                    " needs escaping, which structured output does not support");
                n.names.push_back(name);
                n.children.push_back(compile(sub, path + ".properties." + name, depth + 1));
            }
        }
        if (auto req = s.find("required"); req != s.end()) {
            if (!req->is_array()) throw_usage(path + ".required: expected an array");
            for (const auto& r : *req) {
                bool found = false;
                for (std::size_t i = 0; i < n.names.size(); ++i)
                    if (r.is_string() && n.names[i] == r.get<std::string>()) {
                        n.required |= std::uint64_t(1) << i;
                        found = true;
                    }
                if (!found) throw_usage(path + ".required: " + r.dump() + " is not in properties");
            }
        }
    } else if (type == "array") {
        n.kind = GrammarNode::Kind::array;
        auto items = s.find("items");
        n.items = items == s.end() ? any_value_ : compile(*items, path + ".items", depth + 1);
    } else if (type == "string") {
        n.kind = GrammarNode::Kind::string;
    } else if (type == "number") {
        n.kind = GrammarNode::Kind::number;
    } else if (type == "integer") {
        n.kind = GrammarNode::Kind::integer;
    } else if (type == "boolean") {
        n.kind = GrammarNode::Kind::literals;
        n.literals = {"true", "false"};
    } else if (type == "null") {
        n.kind = GrammarNode::Kind::literals;
        n.literals = {"null"};
    } else {
        throw_usage(path + ".type: unknown type '" + type + "'");
    }
    return add(std::move(n));
}

// Phases of a frame.
enum JsonMatcher::Phase : std::uint8_t {
    value_start,
    obj_key_or_end,   // after '{'
    obj_key,          // declared key: its bytes
    obj_open_key,     // open object: the key string is a child frame
    obj_colon,
    obj_value,        // the value is a child frame
    obj_after_value,  // ',' or '}'
    obj_next_key,     // after ',': '"'
    arr_value_or_end, // after '['
    arr_value,        // the item is a child frame
    arr_after_value,
    arr_next_value,   // after ','
    str_body,
    num_sign,         // after '-'
    num_zero,         // "0" or "-0"
    num_int,
    num_frac_first,
    num_frac,
    num_exp_sign,
    num_exp_first,
    num_exp,
    literal,
};

JsonMatcher::JsonMatcher(const JsonGrammar& grammar) : grammar_(&grammar) { push(grammar.root()); }

JsonMatcher& JsonMatcher::operator=(const JsonMatcher& other) {
    grammar_ = other.grammar_;
    depth_ = other.depth_;
    done_ = other.done_;
    std::copy(other.frames_, other.frames_ + other.depth_, frames_);
    return *this;
}

bool JsonMatcher::push(int node) {
    if (depth_ >= kMaxDepth) return false;
    Frame& f = frames_[depth_++];
    f = Frame{};
    f.node = node;
    f.phase = value_start;
    return true;
}

void JsonMatcher::child_done() {
    --depth_;
    if (depth_ == 0) {
        done_ = true;
        return;
    }
    Frame& p = frames_[depth_ - 1];
    p.ws = 0;
    if (p.phase == obj_open_key) p.phase = obj_colon;
    else if (p.phase == obj_value) p.phase = obj_after_value;
    else if (p.phase == arr_value) p.phase = arr_after_value;
}

bool JsonMatcher::gap(Frame& f, unsigned char c) {
    if (!is_ws(c) || f.ws >= kMaxWhitespace) return false;
    ++f.ws;
    return true;
}

JsonMatcher::Step JsonMatcher::start_value(Frame& f, unsigned char c) {
    const JsonGrammar& g = *grammar_;
    if (g.node(f.node).kind == GrammarNode::Kind::any) {
        if (c == '{') f.node = g.any_object_node();
        else if (c == '[') f.node = g.any_array_node();
        else if (c == '"') f.node = g.any_string_node();
        else if (c == '-' || is_digit(c)) f.node = g.any_number_node();
        else f.node = g.any_literal_node();
    }
    const GrammarNode& n = g.node(f.node);
    switch (n.kind) {
        case GrammarNode::Kind::object:
            if (c != '{') return Step::reject;
            f.phase = obj_key_or_end;
            return Step::consumed;
        case GrammarNode::Kind::array:
            if (c != '[') return Step::reject;
            f.phase = arr_value_or_end;
            return Step::consumed;
        case GrammarNode::Kind::string:
            if (c != '"') return Step::reject;
            f.phase = str_body;
            return Step::consumed;
        case GrammarNode::Kind::number:
        case GrammarNode::Kind::integer:
            f.len = 1;
            if (c == '-') f.phase = num_sign;
            else if (c == '0') f.phase = num_zero;
            else if (is_digit(c)) f.phase = num_int;
            else return Step::reject;
            return Step::consumed;
        case GrammarNode::Kind::literals: {
            std::uint64_t cand = 0;
            for (std::size_t i = 0; i < n.literals.size(); ++i)
                if (n.literals[i][0] == char(c)) cand |= std::uint64_t(1) << i;
            if (!cand) return Step::reject;
            f.cand = cand;
            f.len = 1;
            f.phase = literal;
            return Step::consumed;
        }
        case GrammarNode::Kind::any: break;
    }
    return Step::reject;
}

JsonMatcher::Step JsonMatcher::step(Frame& f, unsigned char c) {
    const GrammarNode& n = grammar_->node(f.node);
    const bool integer = n.kind == GrammarNode::Kind::integer;
    // A number ends where a byte cannot continue it; the byte goes to the frame below.
    auto number_end = [&]() { return Step::done_refeed; };
    switch (Phase(f.phase)) {
        case value_start:
            if (gap(f, c)) return Step::consumed;  // white space before a value
            return start_value(f, c);
        case obj_key_or_end:
        case obj_after_value:
            if (gap(f, c)) return Step::consumed;
            if (c == '}') {
                if ((f.used & n.required) != n.required) return Step::reject;
                return Step::done_consumed;
            }
            if (f.phase == obj_after_value) {
                if (c != ',') return Step::reject;
                f.phase = obj_next_key;
                f.ws = 0;
                return Step::consumed;
            }
            [[fallthrough]];
        case obj_next_key:
            if (f.phase == obj_next_key && gap(f, c)) return Step::consumed;
            if (c != '"') return Step::reject;
            f.ws = 0;
            if (n.open) {
                f.phase = obj_open_key;
                if (!push(grammar_->any_string_node())) return Step::reject;
                frames_[depth_ - 1].phase = str_body;
                return Step::consumed;
            }
            f.cand = all_bits(n.names.size()) & ~f.used;
            if (!f.cand) return Step::reject;
            f.len = 0;
            f.phase = obj_key;
            return Step::consumed;
        case obj_key: {
            if (c == '"') {
                for (std::size_t i = 0; i < n.names.size(); ++i)
                    if ((f.cand >> i & 1) && n.names[i].size() == f.len) {
                        f.sel = std::int8_t(i);
                        f.used |= std::uint64_t(1) << i;
                        f.phase = obj_colon;
                        return Step::consumed;
                    }
                return Step::reject;
            }
            std::uint64_t cand = 0;
            for (std::size_t i = 0; i < n.names.size(); ++i)
                if ((f.cand >> i & 1) && f.len < n.names[i].size() && n.names[i][f.len] == char(c))
                    cand |= std::uint64_t(1) << i;
            if (!cand) return Step::reject;
            f.cand = cand;
            ++f.len;
            return Step::consumed;
        }
        case obj_colon:
            if (gap(f, c)) return Step::consumed;
            if (c != ':') return Step::reject;
            f.ws = 0;
            f.phase = obj_value;
            return push(n.open ? n.children[0] : n.children[std::size_t(f.sel)]) ? Step::consumed : Step::reject;
        case arr_value_or_end:
        case arr_after_value:
        case arr_next_value:
            if (gap(f, c)) return Step::consumed;
            if (c == ']' && f.phase != arr_next_value) return Step::done_consumed;
            if (f.phase == arr_after_value) {
                if (c != ',') return Step::reject;
                f.phase = arr_next_value;
                f.ws = 0;
                return Step::consumed;
            }
            f.phase = arr_value;
            if (!push(n.items)) return Step::reject;
            return step(frames_[depth_ - 1], c);  // the item starts with this byte
        case obj_open_key:
        case obj_value:
        case arr_value: return Step::reject;  // a child frame is on top; never reached
        case str_body:
            if (f.esc == 1) {
                if (c == 'u') f.esc = 2;
                else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') f.esc = 0;
                else return Step::reject;
                return Step::consumed;
            }
            if (f.esc >= 2) {
                if (!is_hex(c)) return Step::reject;
                f.esc = f.esc == 5 ? 0 : std::uint8_t(f.esc + 1);
                return Step::consumed;
            }
            if (c == '"') return Step::done_consumed;
            if (c == '\\') {
                f.esc = 1;
                return Step::consumed;
            }
            return c < 0x20 ? Step::reject : Step::consumed;
        case num_sign:
            if (c == '0') f.phase = num_zero;
            else if (is_digit(c)) f.phase = num_int;
            else return Step::reject;
            ++f.len;
            return Step::consumed;
        case num_zero:
        case num_int:
        case num_frac:
        case num_exp: {
            if (f.len >= kMaxNumberBytes) return number_end();
            const Phase p = Phase(f.phase);
            if (is_digit(c) && p != num_zero) {
                ++f.len;
                return Step::consumed;
            }
            if (c == '.' && !integer && (p == num_zero || p == num_int)) {
                f.phase = num_frac_first;
                ++f.len;
                return Step::consumed;
            }
            if ((c == 'e' || c == 'E') && !integer && p != num_exp) {
                f.phase = num_exp_sign;
                ++f.len;
                return Step::consumed;
            }
            return number_end();
        }
        case num_frac_first:
            if (!is_digit(c)) return Step::reject;
            f.phase = num_frac;
            ++f.len;
            return Step::consumed;
        case num_exp_sign:
            if (c == '+' || c == '-') {
                f.phase = num_exp_first;
                ++f.len;
                return Step::consumed;
            }
            [[fallthrough]];
        case num_exp_first:
            if (!is_digit(c)) return Step::reject;
            f.phase = num_exp;
            ++f.len;
            return Step::consumed;
        case literal: {
            std::uint64_t cand = 0;
            bool whole = false;
            for (std::size_t i = 0; i < n.literals.size(); ++i) {
                if (!(f.cand >> i & 1)) continue;
                const std::string& l = n.literals[i];
                if (l.size() == f.len) whole = true;
                else if (l[f.len] == char(c)) cand |= std::uint64_t(1) << i;
            }
            if (cand) {
                f.cand = cand;
                ++f.len;
                return Step::consumed;
            }
            return whole ? Step::done_refeed : Step::reject;
        }
    }
    return Step::reject;
}

bool JsonMatcher::feed(unsigned char c) {
    while (depth_ > 0) {
        switch (step(frames_[depth_ - 1], c)) {
            case Step::consumed: return true;
            case Step::done_consumed: child_done(); return true;
            case Step::done_refeed: child_done(); continue;
            case Step::reject: return false;
        }
    }
    return false;  // the value is complete: nothing may follow
}

bool JsonMatcher::feed(std::string_view bytes) {
    for (char c : bytes)
        if (!feed(static_cast<unsigned char>(c))) return false;
    return true;
}

bool JsonMatcher::complete() const {
    if (done_) return true;
    if (depth_ != 1) return false;
    // A number or literal at the root has no closing byte: whole when it could end here.
    const Frame& f = frames_[0];
    const GrammarNode& n = grammar_->node(f.node);
    switch (Phase(f.phase)) {
        case num_zero:
        case num_int:
        case num_frac:
        case num_exp: return true;
        case literal:
            for (std::size_t i = 0; i < n.literals.size(); ++i)
                if ((f.cand >> i & 1) && n.literals[i].size() == f.len) return true;
            return false;
        default: return false;
    }
}

bool JsonMatcher::in_plain_string() const {
    return depth_ > 0 && frames_[depth_ - 1].phase == str_body && frames_[depth_ - 1].esc == 0;
}

}  // namespace aff
