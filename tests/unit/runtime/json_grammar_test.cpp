// Tests for libaff/runtime/json_grammar and token_constraint: which texts a compiled
// schema accepts (nesting, enums, required and unknown keys, integers, strings with
// escapes, whitespace), which schema keywords are refused, and the token masks over a
// small vocabulary (allowed ids at each step, the end token only once the value is whole,
// the thinking marker, the forced tool-call prefix).
#include "libaff/core/error.hpp"
#include "libaff/runtime/json_grammar.hpp"
#include "libaff/runtime/token_constraint.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <set>

using aff::JsonGrammar;
using aff::JsonMatcher;
using ojson = nlohmann::ordered_json;

namespace {

const ojson kSchema = ojson::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "color": {"enum": ["red", "green", 3, null]},
    "size": {"type": "integer"},
    "ratio": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "inner": {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "null"}},
              "required": ["ok"], "additionalProperties": false}
  },
  "required": ["name", "color", "inner"],
  "additionalProperties": false, "title": "T"
})");

bool accepts(const JsonGrammar& g, std::string_view text) {
    JsonMatcher m(g);
    return m.feed(text) && m.complete();
}

// Allowed ids after a mask over logits of zeros.
std::set<int> allowed(aff::TokenConstraint& c, std::size_t vocab) {
    std::vector<float> logits(vocab, 0.0f);
    c.mask(logits);
    std::set<int> out;
    for (std::size_t i = 0; i < vocab; ++i)
        if (!std::isinf(logits[i])) out.insert(int(i));
    return out;
}

}  // namespace

TEST_CASE("a compiled schema accepts exactly the texts it describes", "[runtime]") {
    const auto g = JsonGrammar::from_schema(kSchema);
    CHECK(accepts(*g, R"({"name":"a","color":"red","inner":{"ok":true}})"));
    CHECK(accepts(*g, R"({ "inner" : {"n": null, "ok": false}, "color": 3, "name": "x\"\u00e9\n",
                          "tags": ["a", "b"], "size": -12, "ratio": 0.5e-3 })"));
    CHECK(accepts(*g, R"({"name":"","color":null,"inner":{"ok":true},"tags":[]})"));
    CHECK_FALSE(accepts(*g, R"({"name":"a","color":"red"})"));                       // required inner
    CHECK_FALSE(accepts(*g, R"({"name":"a","color":"red","inner":{}})"));           // required ok
    CHECK_FALSE(accepts(*g, R"({"name":"a","color":"blue","inner":{"ok":true}})"));  // enum
    CHECK_FALSE(accepts(*g, R"({"name":"a","color":"red","inner":{"ok":true},"x":1})"));  // unknown key
    CHECK_FALSE(accepts(*g, R"({"name":"a","name":"b","color":"red","inner":{"ok":true}})"));  // repeated key
    CHECK_FALSE(accepts(*g, R"({"name":"a","color":"red","inner":{"ok":true},"size":1.5})"));  // integer
    CHECK_FALSE(accepts(*g, R"({"name":"a","color":"red","inner":{"ok":true},"size":01})"));
    CHECK_FALSE(accepts(*g, R"({"name":1,"color":"red","inner":{"ok":true}})"));     // type
    CHECK_FALSE(accepts(*g, R"({"name":"a\q","color":"red","inner":{"ok":true}})"));  // escape
    CHECK_FALSE(accepts(*g, R"({"name":"a","color":"red","inner":{"ok":true}} )"));  // nothing after the value
    JsonMatcher partial(*g);
    CHECK(partial.feed(R"({"name":"a)"));
    CHECK(partial.in_plain_string());
    CHECK_FALSE(partial.complete());
}

TEST_CASE("json_object mode and schema-less parts take any JSON value", "[runtime]") {
    const auto g = JsonGrammar::any_object();
    CHECK(accepts(*g, R"({"a":[1,{"b":null},"c",true,-0.5E+2],"d":{}})"));
    CHECK(accepts(*g, "{}"));
    CHECK_FALSE(accepts(*g, "[1]"));  // json_object: an object
    CHECK_FALSE(accepts(*g, R"({"a":tru})"));
    CHECK_FALSE(accepts(*g, R"({"a":1,})"));
    const auto any = JsonGrammar::from_schema(ojson::parse(R"({"type":"array"})"));
    CHECK(accepts(*any, R"([1, "x", [], {"k": false}])"));
    const auto number = JsonGrammar::from_schema(ojson::parse(R"({"type":"number"})"));
    CHECK(accepts(*number, "12.5"));  // a root number is whole without a closing byte
    CHECK_FALSE(accepts(*number, "12."));
}

TEST_CASE("unsupported schema keywords are refused by name", "[runtime]") {
    auto refused = [](const char* schema) {
        try {
            JsonGrammar::from_schema(ojson::parse(schema));
        } catch (const aff::Error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    CHECK(refused(R"({"anyOf":[{"type":"string"}]})") == "schema: the keyword 'anyOf' is not supported in structured output");
    CHECK(refused(R"({"type":"object","properties":{"a":{"type":"string","pattern":"x"}}})") ==
          "schema.properties.a: the keyword 'pattern' is not supported in structured output");
    CHECK(refused(R"({"type":["string","null"]})") == "schema.type: expected one type name (unions are not supported)");
    CHECK(refused(R"({"type":"object","properties":{"a":{}},"required":["b"]})") ==
          "schema.required: \"b\" is not in properties");
    CHECK(refused(R"({"type":"thing"})") == "schema.type: unknown type 'thing'");
}

TEST_CASE("the JSON mask allows the tokens that continue the value and the end only when whole", "[runtime]") {
    // ids: 0 end, 1 '{', 2 '{"', 3 '"a"', 4 ':', 5 '1', 6 '}', 7 '"', 8 'a', 9 'x', 10 ' ', 11 '1}', 12 (no text)
    auto vocab = std::make_shared<aff::TokenBytes>(
        std::vector<std::string>{"", "{", "{\"", "\"a\"", ":", "1", "}", "\"", "a", "x", " ", "1}", ""},
        std::vector<std::int32_t>{0});
    const auto g = JsonGrammar::from_schema(ojson::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})"));
    aff::JsonConstraint c(vocab, g);
    CHECK(allowed(c, 13) == std::set<int>{1, 2, 10});  // white space may come first
    c.accept(2);  // {"
    CHECK(allowed(c, 14) == std::set<int>{8});  // the key's next byte only; id 13 is past the vocabulary
    c.accept(8);
    CHECK(allowed(c, 13) == std::set<int>{7});
    c.accept(7);
    CHECK(allowed(c, 13) == std::set<int>{4, 10});
    c.accept(4);
    CHECK(allowed(c, 13) == std::set<int>{5, 10, 11});
    c.accept(11);  // 1}
    CHECK(allowed(c, 13) == std::set<int>{0});
    CHECK(c.matcher().complete());
}

TEST_CASE("constraints wait for the thinking marker; the prefix constraint forces a tool call's opening", "[runtime]") {
    auto vocab = std::make_shared<aff::TokenBytes>(
        std::vector<std::string>{"", "hmm", "</think>", "{", "}", "<call ", "name=f>", "name=g>", "x", "<call name=f>x"},
        std::vector<std::int32_t>{0});
    aff::JsonConstraint json(vocab, JsonGrammar::any_object(), "</think>");
    CHECK(allowed(json, 10).size() == 10);  // reasoning is free
    json.accept(1);
    json.accept(2);
    CHECK(allowed(json, 10) == std::set<int>{3});
    aff::PrefixConstraint prefix(vocab, {"<call name=f>", "<call name=g>"});
    CHECK(allowed(prefix, 10) == std::set<int>{5, 9});
    prefix.accept(5);
    CHECK(allowed(prefix, 10) == std::set<int>{6, 7});
    prefix.accept(7);
    CHECK(prefix.done());
    CHECK(allowed(prefix, 10).size() == 10);  // free after the opening
}
