// Parsing and validation of OpenAI request bodies, and of llama-server's /tokenize and
// /detokenize (see openai_request.hpp). Each
// check throws a local Invalid carrying the field path; the two entry points turn it
// into an ApiError, so nothing escapes as an exception.
#include "libaff/serve/openai_request.hpp"

#include "libaff/core/error.hpp"

#include <cmath>
#include <limits>

namespace aff::serve {
namespace {

using json = nlohmann::ordered_json;  // keeps the client's key order (tool schemas)

struct Invalid {
    std::string message;
    std::string param;
    std::string code;
};

[[noreturn]] void invalid(std::string param, std::string message, std::string code = {}) {
    throw Invalid{std::move(message), std::move(param), std::move(code)};
}

const char* type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::string: return "a string";
        case json::value_t::array: return "an array";
        case json::value_t::object: return "an object";
        case json::value_t::discarded: return "nothing";
        default: return "a number";
    }
}

[[noreturn]] void wrong_type(const std::string& param, const char* want, const json& got) {
    invalid(param, "'" + param + "' must be " + want + ", got " + type_name(got), "invalid_type");
}

// Present and not null?
const json* field(const json& obj, const char* name) {
    const auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

std::string get_string(const json& v, const std::string& param) {
    if (!v.is_string()) wrong_type(param, "a string", v);
    return v.get<std::string>();
}

bool get_bool(const json& v, const std::string& param) {
    if (!v.is_boolean()) wrong_type(param, "a boolean", v);
    return v.get<bool>();
}

double get_number(const json& v, const std::string& param, double lo, double hi) {
    if (!v.is_number()) wrong_type(param, "a number", v);
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi)
        invalid(param, "'" + param + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                           ", got " + v.dump(), "invalid_value");
    return d;
}

std::int64_t get_integer(const json& v, const std::string& param, std::int64_t lo, std::int64_t hi) {
    if (v.is_number_float()) {
        const double d = v.get<double>();
        // |d| < 2^63 first: converting a larger double to int64 is undefined.
        if (std::isfinite(d) && std::fabs(d) < 9.2e18 && d == std::floor(d) && d >= double(lo) && d <= double(hi))
            return std::int64_t(d);
    }
    if (!v.is_number_integer()) wrong_type(param, "an integer", v);
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
        invalid(param, "'" + param + "' is out of range", "invalid_value");
    const std::int64_t i = v.get<std::int64_t>();
    if (i < lo || i > hi)
        invalid(param, "'" + param + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                           ", got " + std::to_string(i), "invalid_value");
    return i;
}

}  // namespace

bool json_depth_within(std::string_view text, std::size_t max_depth) {
    std::size_t depth = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return false;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return true;
}

namespace {

json parse_body(std::string_view body) {
    if (!valid_utf8(body)) invalid("", "request body is not valid UTF-8", "invalid_utf8");
    if (!json_depth_within(body, kMaxJsonDepth))
        invalid("", "request body nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                "invalid_json");
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) {
        // Parse again for the parser's own message (position and reason).
        try {
            const json again = json::parse(body);
            (void)again;
        } catch (const json::parse_error& e) {
            invalid("", std::string("malformed JSON in request body: ") + e.what(), "invalid_json");
        }
        invalid("", "malformed JSON in request body", "invalid_json");
    }
    if (!j.is_object()) invalid("", std::string("request body must be a JSON object, got ") + type_name(j), "invalid_json");
    return j;
}

// Text of a message `content`: a string, or an array of {"type": "text", "text": ...}.
std::string content_text(const json& v, const std::string& param) {
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array()) wrong_type(param, "a string or an array of content parts", v);
    std::string text;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string p = param + "[" + std::to_string(i) + "]";
        const json& part = v[i];
        if (!part.is_object()) wrong_type(p, "an object", part);
        const json* type = field(part, "type");
        if (!type) invalid(p + ".type", "'" + p + ".type' is required", "missing_required_parameter");
        const std::string t = get_string(*type, p + ".type");
        if (t != "text")
            invalid(p + ".type", "content part type '" + t + "' is not supported (text only)", "unsupported_value");
        const json* tx = field(part, "text");
        if (!tx) invalid(p + ".text", "'" + p + ".text' is required", "missing_required_parameter");
        text += get_string(*tx, p + ".text");
    }
    return text;
}

void parse_sampling(const json& j, SamplingRequest& s, bool chat) {
    if (const json* v = field(j, "n"); v && get_integer(*v, "n", 1, 1 << 20) != 1)
        invalid("n", "'n' must be 1: this server generates one choice per request", "unsupported_value");
    if (const json* v = field(j, "best_of"); v && get_integer(*v, "best_of", 1, 1 << 20) != 1)
        invalid("best_of", "'best_of' must be 1", "unsupported_value");
    if (const json* v = field(j, "temperature")) s.temperature = float(get_number(*v, "temperature", 0, 2));
    if (const json* v = field(j, "top_p")) s.top_p = float(get_number(*v, "top_p", 0, 1));
    if (const json* v = field(j, "top_k")) {
        const auto k = get_integer(*v, "top_k", -1, std::numeric_limits<int>::max());
        s.top_k = k < 0 ? 0 : int(k);
    }
    if (const json* v = field(j, "min_p")) s.min_p = float(get_number(*v, "min_p", 0, 1));
    if (const json* v = field(j, "seed"))
        s.seed = std::uint64_t(get_integer(*v, "seed", std::numeric_limits<std::int64_t>::min(),
                                           std::numeric_limits<std::int64_t>::max()));
    for (const char* name : {"max_tokens", "max_completion_tokens"})
        if (const json* v = field(j, name))
            s.max_tokens = std::size_t(get_integer(*v, name, 1, std::numeric_limits<std::int64_t>::max()));
    if (const json* v = field(j, "stop")) {
        if (v->is_string()) {
            s.stop.push_back(v->get<std::string>());
        } else if (v->is_array()) {
            if (v->size() > 16) invalid("stop", "'stop' may hold at most 16 strings", "invalid_value");
            for (std::size_t i = 0; i < v->size(); ++i) s.stop.push_back(get_string((*v)[i], "stop[" + std::to_string(i) + "]"));
        } else {
            wrong_type("stop", "a string or an array of strings", *v);
        }
        for (const auto& st : s.stop)
            if (st.empty()) invalid("stop", "'stop' strings must not be empty", "invalid_value");
    }
    if (const json* v = field(j, "stream")) s.stream = get_bool(*v, "stream");
    if (const json* v = field(j, "stream_options")) {
        if (!v->is_object()) wrong_type("stream_options", "an object", *v);
        if (const json* u = field(*v, "include_usage")) s.include_usage = get_bool(*u, "stream_options.include_usage");
    }
    for (const char* name : {"presence_penalty", "frequency_penalty"})
        if (const json* v = field(j, name); v && get_number(*v, name, -2, 2) != 0)
            invalid(name, std::string("'") + name + "' is not supported (only 0)", "unsupported_value");
    if (const json* v = field(j, "logit_bias")) {
        if (!v->is_object()) wrong_type("logit_bias", "an object", *v);
        if (!v->empty()) invalid("logit_bias", "'logit_bias' is not supported", "unsupported_value");
    }
    if (chat) {
        bool want = false;
        if (const json* v = field(j, "logprobs")) want = get_bool(*v, "logprobs");
        int top = 0;
        if (const json* v = field(j, "top_logprobs")) {
            top = int(get_integer(*v, "top_logprobs", 0, 20));
            if (!want && top > 0) invalid("top_logprobs", "'top_logprobs' needs 'logprobs': true", "invalid_value");
        }
        if (want) s.logprobs = top;
    } else {
        if (const json* v = field(j, "logprobs")) s.logprobs = int(get_integer(*v, "logprobs", 0, 5));
    }
}

ToolCall parse_tool_call(const json& v, const std::string& p) {
    if (!v.is_object()) wrong_type(p, "an object", v);
    ToolCall call;
    if (const json* id = field(v, "id")) call.id = get_string(*id, p + ".id");
    if (const json* t = field(v, "type"); t && get_string(*t, p + ".type") != "function")
        invalid(p + ".type", "'" + p + ".type' must be \"function\"", "invalid_value");
    const json* fn = field(v, "function");
    if (!fn) invalid(p + ".function", "'" + p + ".function' is required", "missing_required_parameter");
    if (!fn->is_object()) wrong_type(p + ".function", "an object", *fn);
    const json* name = field(*fn, "name");
    if (!name) invalid(p + ".function.name", "'" + p + ".function.name' is required", "missing_required_parameter");
    call.name = get_string(*name, p + ".function.name");
    const json* args = field(*fn, "arguments");
    if (!args) {
        call.arguments = "{}";
    } else if (args->is_object()) {
        call.arguments = args->dump();
    } else {
        call.arguments = get_string(*args, p + ".function.arguments");
        const json parsed = json_depth_within(call.arguments, kMaxJsonDepth) ? json::parse(call.arguments, nullptr, false)
                                                                             : json(json::value_t::discarded);
        if (parsed.is_discarded() || !parsed.is_object())
            invalid(p + ".function.arguments", "'" + p + ".function.arguments' must be a JSON object in a string",
                    "invalid_value");
    }
    return call;
}

ChatMessage parse_message(const json& m, std::size_t index) {
    const std::string p = "messages[" + std::to_string(index) + "]";
    if (!m.is_object()) wrong_type(p, "an object", m);
    const json* role = field(m, "role");
    if (!role) invalid(p + ".role", "'" + p + ".role' is required", "missing_required_parameter");
    ChatMessage msg;
    msg.role = get_string(*role, p + ".role");
    if (msg.role != "system" && msg.role != "developer" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "tool")
        invalid(p + ".role", "unknown role '" + msg.role + "' (system, developer, user, assistant or tool)",
                "invalid_value");
    const json* content = field(m, "content");
    if (content) msg.content = content_text(*content, p + ".content");
    else if (msg.role != "assistant")
        invalid(p + ".content", "'" + p + ".content' is required for role " + msg.role, "missing_required_parameter");
    if (const json* n = field(m, "name")) msg.name = get_string(*n, p + ".name");
    if (msg.role == "assistant") {
        for (const char* key : {"reasoning_content", "reasoning"})
            if (const json* r = field(m, key)) msg.reasoning_content = get_string(*r, p + "." + key);
        if (const json* calls = field(m, "tool_calls")) {
            if (!calls->is_array()) wrong_type(p + ".tool_calls", "an array", *calls);
            for (std::size_t i = 0; i < calls->size(); ++i)
                msg.tool_calls.push_back(parse_tool_call((*calls)[i], p + ".tool_calls[" + std::to_string(i) + "]"));
        }
    }
    if (msg.role == "tool")
        if (const json* id = field(m, "tool_call_id")) msg.tool_call_id = get_string(*id, p + ".tool_call_id");
    return msg;
}

ChatRequest parse_chat(std::string_view body, bool default_thinking) {
    const json j = parse_body(body);
    ChatRequest r;
    if (const json* v = field(j, "model")) r.model = get_string(*v, "model");
    const json* messages = field(j, "messages");
    if (!messages) invalid("messages", "'messages' is required", "missing_required_parameter");
    if (!messages->is_array()) wrong_type("messages", "an array", *messages);
    if (messages->empty()) invalid("messages", "'messages' must not be empty", "invalid_value");
    for (std::size_t i = 0; i < messages->size(); ++i) r.prompt.messages.push_back(parse_message((*messages)[i], i));
    parse_sampling(j, r.sampling, true);

    if (const json* tools = field(j, "tools")) {
        if (!tools->is_array()) wrong_type("tools", "an array", *tools);
        for (std::size_t i = 0; i < tools->size(); ++i) {
            const std::string p = "tools[" + std::to_string(i) + "]";
            const json& t = (*tools)[i];
            if (!t.is_object()) wrong_type(p, "an object", t);
            if (const json* ty = field(t, "type"); ty && get_string(*ty, p + ".type") != "function")
                invalid(p + ".type", "'" + p + ".type' must be \"function\"", "invalid_value");
            const json* fn = field(t, "function");
            if (!fn) invalid(p + ".function", "'" + p + ".function' is required", "missing_required_parameter");
            if (!fn->is_object()) wrong_type(p + ".function", "an object", *fn);
            const json* name = field(*fn, "name");
            if (!name) invalid(p + ".function.name", "'" + p + ".function.name' is required", "missing_required_parameter");
            if (get_string(*name, p + ".function.name").empty())
                invalid(p + ".function.name", "'" + p + ".function.name' must not be empty", "invalid_value");
            if (const json* d = field(*fn, "description")) get_string(*d, p + ".function.description");
            if (const json* ps = field(*fn, "parameters"); ps && !ps->is_object())
                wrong_type(p + ".function.parameters", "an object", *ps);
            r.prompt.tools.push_back(t);
        }
    }
    if (const json* tc = field(j, "tool_choice")) {
        if (tc->is_string()) {
            r.tool_choice = tc->get<std::string>();
            if (r.tool_choice != "auto" && r.tool_choice != "none" && r.tool_choice != "required")
                invalid("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or a function",
                        "invalid_value");
        } else if (tc->is_object()) {
            const json* fn = field(*tc, "function");
            const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
            if (!name) invalid("tool_choice", "'tool_choice.function.name' is required", "missing_required_parameter");
            r.tool_choice = "function";
            r.tool_choice_name = get_string(*name, "tool_choice.function.name");
            bool known = false;
            for (const auto& t : r.prompt.tools) known = known || t["function"].value("name", "") == r.tool_choice_name;
            if (!known)
                invalid("tool_choice", "'tool_choice' names function '" + r.tool_choice_name + "', which is not in 'tools'",
                        "invalid_value");
        } else {
            wrong_type("tool_choice", "a string or an object", *tc);
        }
        if ((r.tool_choice == "required") && r.prompt.tools.empty())
            invalid("tool_choice", "'tool_choice' is \"required\" but no 'tools' were given", "invalid_value");
    }
    if (const json* rf = field(j, "response_format")) {
        if (!rf->is_object()) wrong_type("response_format", "an object", *rf);
        const json* t = field(*rf, "type");
        if (!t) invalid("response_format.type", "'response_format.type' is required", "missing_required_parameter");
        const std::string type = get_string(*t, "response_format.type");
        if (type == "json_object") {
            r.grammar = JsonGrammar::any_object();
        } else if (type == "json_schema") {
            const json* js = field(*rf, "json_schema");
            if (!js || !js->is_object())
                invalid("response_format.json_schema", "'response_format.json_schema' must be an object", "invalid_value");
            const json* schema = field(*js, "schema");
            if (!schema) invalid("response_format.json_schema.schema", "'response_format.json_schema.schema' is required",
                                 "missing_required_parameter");
            try {
                r.grammar = JsonGrammar::from_schema(*schema);
            } catch (const Error& e) {
                invalid("response_format.json_schema.schema", std::string("response_format.json_schema.") + e.what(),
                        "unsupported_value");
            }
        } else if (type != "text") {
            invalid("response_format.type", "'response_format.type' must be text, json_object or json_schema, got '" + type + "'",
                    "invalid_value");
        }
        // The model is told the format in its own prompt (the chat encoding's response-format block).
        if (r.grammar) r.prompt.response_format = *rf;
    }

    // Thinking: chat_template_kwargs (vLLM, SGLang), then DeepSeek's `thinking`
    // object, then OpenAI's reasoning_effort; the first that is present decides.
    std::optional<bool> thinking;
    if (const json* kw = field(j, "chat_template_kwargs")) {
        if (!kw->is_object()) wrong_type("chat_template_kwargs", "an object", *kw);
        for (const char* key : {"thinking", "enable_thinking"})
            if (const json* v = field(*kw, key)) thinking = get_bool(*v, std::string("chat_template_kwargs.") + key);
    }
    if (const json* th = field(j, "thinking"); th && !thinking) {
        if (!th->is_object()) wrong_type("thinking", "an object", *th);
        const json* t = field(*th, "type");
        const std::string type = t ? get_string(*t, "thinking.type") : "";
        if (type != "enabled" && type != "disabled")
            invalid("thinking.type", "'thinking.type' must be \"enabled\" or \"disabled\"", "invalid_value");
        thinking = type == "enabled";
    }
    if (const json* re = field(j, "reasoning_effort")) {
        const std::string effort = get_string(*re, "reasoning_effort");
        if (effort == "none") {
            if (!thinking) thinking = false;
        } else if (effort == "minimal" || effort == "low" || effort == "medium" || effort == "high") {
            if (!thinking) thinking = true;
            r.prompt.reasoning_effort = "high";  // V4 renders all of these like no effort at all
        } else if (effort == "max" || effort == "xhigh") {
            if (!thinking) thinking = true;
            r.prompt.reasoning_effort = "max";
        } else {
            invalid("reasoning_effort",
                    "'reasoning_effort' must be none, minimal, low, medium, high, xhigh or max, got '" + effort + "'",
                    "invalid_value");
        }
    }
    r.thinking_requested = thinking.has_value();
    r.prompt.thinking = thinking.value_or(default_thinking);
    if (!r.prompt.thinking) r.prompt.reasoning_effort.clear();
    return r;
}

CompletionRequest parse_completion(std::string_view body) {
    const json j = parse_body(body);
    CompletionRequest r;
    if (const json* v = field(j, "model")) r.model = get_string(*v, "model");
    const json* prompt = field(j, "prompt");
    if (!prompt) invalid("prompt", "'prompt' is required", "missing_required_parameter");
    json p = *prompt;
    // A batch of one is the same request; larger batches are n > 1 in disguise.
    if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
        if (p.size() != 1) invalid("prompt", "'prompt' must be one prompt: batches are not supported", "unsupported_value");
        p = p[0];
    }
    if (p.is_string()) {
        r.prompt_text = p.get<std::string>();
    } else if (p.is_array()) {
        if (p.empty()) invalid("prompt", "'prompt' must not be an empty token list", "invalid_value");
        r.prompt_is_tokens = true;
        for (std::size_t i = 0; i < p.size(); ++i)
            r.prompt_tokens.push_back(std::int32_t(get_integer(p[i], "prompt[" + std::to_string(i) + "]", 0,
                                                               std::numeric_limits<std::int32_t>::max())));
    } else {
        wrong_type("prompt", "a string or an array of token ids", p);
    }
    parse_sampling(j, r.sampling, false);
    if (const json* v = field(j, "echo"); v && get_bool(*v, "echo"))
        invalid("echo", "'echo' is not supported", "unsupported_value");
    if (const json* v = field(j, "suffix"); v && !get_string(*v, "suffix").empty())
        invalid("suffix", "'suffix' is not supported", "unsupported_value");
    return r;
}

// llama-server's /tokenize: {"content", "add_special" (BOS, default false), "with_pieces"}.
TokenizeRequest parse_tokenize(std::string_view body) {
    const json j = parse_body(body);
    TokenizeRequest r;
    const json* content = field(j, "content");
    if (!content) invalid("content", "'content' is required", "missing_required_parameter");
    r.content = get_string(*content, "content");
    if (const json* v = field(j, "add_special")) r.add_special = get_bool(*v, "add_special");
    if (const json* v = field(j, "with_pieces")) r.with_pieces = get_bool(*v, "with_pieces");
    return r;
}

// llama-server's /detokenize: {"tokens": [ids]}.
DetokenizeRequest parse_detokenize(std::string_view body) {
    const json j = parse_body(body);
    DetokenizeRequest r;
    const json* tokens = field(j, "tokens");
    if (!tokens) invalid("tokens", "'tokens' is required", "missing_required_parameter");
    if (!tokens->is_array()) wrong_type("tokens", "an array of token ids", *tokens);
    for (std::size_t i = 0; i < tokens->size(); ++i)
        r.tokens.push_back(std::int32_t(get_integer((*tokens)[i], "tokens[" + std::to_string(i) + "]", 0,
                                                    std::numeric_limits<std::int32_t>::max())));
    return r;
}

template <class T, class Fn>
std::variant<T, ApiError> guarded(Fn&& fn) {
    try {
        return fn();
    } catch (const Invalid& e) {
        ApiError err;
        err.message = e.message;
        err.param = e.param;
        err.code = e.code;
        return err;
    } catch (const nlohmann::json::exception& e) {
        ApiError err;
        err.message = std::string("invalid request: ") + e.what();
        return err;
    }
}

}  // namespace

nlohmann::json ApiError::to_json() const {
    nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
    if (!param.empty()) e["param"] = param;
    if (!code.empty()) e["code"] = code;
    return nlohmann::json{{"error", e}};
}

std::variant<ChatRequest, ApiError> parse_chat_request(std::string_view body, bool default_thinking) {
    return guarded<ChatRequest>([&] { return parse_chat(body, default_thinking); });
}

std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body) {
    return guarded<CompletionRequest>([&] { return parse_completion(body); });
}

std::variant<TokenizeRequest, ApiError> parse_tokenize_request(std::string_view body) {
    return guarded<TokenizeRequest>([&] { return parse_tokenize(body); });
}

std::variant<DetokenizeRequest, ApiError> parse_detokenize_request(std::string_view body) {
    return guarded<DetokenizeRequest>([&] { return parse_detokenize(body); });
}

ChatPrompt prompt_shown(const ChatRequest& r) {
    ChatPrompt prompt = r.prompt;
    if (r.tool_choice == "none") {
        prompt.tools = nlohmann::ordered_json::array();
    } else if (r.tool_choice == "function") {
        nlohmann::ordered_json only = nlohmann::ordered_json::array();
        for (const auto& t : prompt.tools)
            if (t["function"].value("name", "") == r.tool_choice_name) only.push_back(t);
        prompt.tools = only;
    }
    return prompt;
}

bool valid_utf8(std::string_view s) {
    std::size_t i = 0;
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    while (i < s.size()) {
        const unsigned c = b[i];
        if (c < 0x80) { ++i; continue; }
        std::size_t len;
        std::uint32_t cp;
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > s.size()) return false;
        for (std::size_t k = 1; k < len; ++k) {
            if ((b[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (b[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

}  // namespace aff::serve
