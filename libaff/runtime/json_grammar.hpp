// Structured output: a JSON grammar compiled once from a JSON schema (or "any JSON
// object", OpenAI's json_object mode) and a byte-level matcher that walks generated text
// through it. The matcher is what a token mask is computed from (token_constraint.hpp):
// a token is allowed when all of its bytes are accepted from the current state.
//
// The schema subset: type object (properties, required; keys outside `properties` are
// refused, as OpenAI's strict mode requires), array (items), string, number, integer,
// boolean, null, enum and const of any JSON values, nesting to any depth; a schema
// without a type (or {}) is any JSON value. Annotations (title, description, default,
// examples, $schema, additionalProperties, strict) are ignored; any other keyword
// (anyOf, $ref, pattern, minLength, ...) is refused by name, so nothing is silently
// unenforced. White space: up to 48 bytes of space, tab or newline before and after tokens.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace aff {

struct GrammarNode {
    enum class Kind : std::uint8_t { any, object, array, string, number, integer, literals };
    Kind kind = Kind::any;
    std::vector<std::string> names;  // object: declared keys (at most 64), in the schema's order
    std::vector<int> children;       // object: a value node per key (open object: one, for any key)
    std::uint64_t required = 0;      // object: bit i = names[i] is required
    bool open = false;               // object: any string key (no `properties`)
    int items = -1;                  // array
    std::vector<std::string> literals;  // literals: the JSON texts allowed (enum, const, true/false, null)
};

class JsonGrammar {
public:
    // Throws aff::Error (usage) naming the schema path of an unsupported or malformed part.
    static std::shared_ptr<const JsonGrammar> from_schema(const nlohmann::ordered_json& schema);
    // Any JSON object (json_object mode).
    static std::shared_ptr<const JsonGrammar> any_object();

    const GrammarNode& node(int i) const { return nodes_[std::size_t(i)]; }
    int root() const { return root_; }
    // Shared nodes of the generic JSON value.
    int any_object_node() const { return any_object_; }
    int any_array_node() const { return any_array_; }
    int any_string_node() const { return any_string_; }
    int any_number_node() const { return any_number_; }
    int any_literal_node() const { return any_literal_; }
    int any_value_node() const { return any_value_; }

private:
    JsonGrammar();
    int add(GrammarNode n);
    int compile(const nlohmann::ordered_json& schema, const std::string& path, int depth);

    std::vector<GrammarNode> nodes_;
    int root_ = -1;
    int any_value_ = -1, any_object_ = -1, any_array_ = -1, any_string_ = -1, any_number_ = -1, any_literal_ = -1;
};

// Where generated text is in the grammar: a stack of frames, plain data, cheap to copy.
class JsonMatcher {
public:
    // `grammar` must outlive the matcher (and its copies, which the mask makes per token).
    explicit JsonMatcher(const JsonGrammar& grammar);
    // Copies only the frames in use: the mask copies the state once per probe.
    JsonMatcher(const JsonMatcher& other) { *this = other; }
    JsonMatcher& operator=(const JsonMatcher& other);

    // Feeds one byte; false (and the state unchanged in meaning: do not use it further)
    // when the byte cannot continue any text the grammar allows.
    bool feed(unsigned char c);
    bool feed(std::string_view bytes);
    // The text so far is one whole value of the grammar (nothing more may follow).
    bool complete() const;
    // Inside a string's characters, where any byte but '"', '\\' and controls keeps the state.
    bool in_plain_string() const;

private:
    enum Phase : std::uint8_t;
    struct Frame {
        int node;
        std::uint8_t phase;
        std::uint8_t ws;      // whitespace bytes in the current gap
        std::uint8_t esc;     // string: 0, 1 after '\\', 2..5 hex digits of \u still due
        std::int8_t sel;      // object: the key being read or whose value follows
        std::uint32_t len;    // key or literal bytes matched; number bytes
        std::uint64_t used;   // object: keys given
        std::uint64_t cand;   // key or literal candidates still matching
    };
    enum class Step { consumed, done_consumed, done_refeed, reject };
    static constexpr int kMaxDepth = 16;  // nesting deeper than this is refused

    Step step(Frame& f, unsigned char c);
    Step start_value(Frame& f, unsigned char c);
    bool push(int node);
    void child_done();
    bool gap(Frame& f, unsigned char c);

    const JsonGrammar* grammar_;
    Frame frames_[kMaxDepth];
    int depth_ = 0;
    bool done_ = false;
};

}  // namespace aff
