// Prompt rendering for DeepSeek-V4 (see chat.hpp). The steps mirror the reference encoder
// so that its behaviour carries over exactly, including its less obvious rules:
// consecutive user and tool messages merge into one user turn (blocks joined by "\n\n"),
// tool results are reordered to the order of the calls that asked for them, and in
// thinking mode (unless some message carries tools) developer messages before the last
// user message disappear and earlier assistant turns lose their reasoning. The prompt is
// built as pieces that say whether the template wrote them (markup) or a message or tool
// schema did (text), so that encoding can keep the client's words from becoming special
// tokens.
#include "libaff/core/error.hpp"
#include "libaff/tokenizer/chat.hpp"
#include "libaff/tokenizer/dsv4_strings.hpp"
#include "libaff/tokenizer/py_json.hpp"

#include <algorithm>
#include <map>

namespace aff::chat {

using ojson = nlohmann::ordered_json;

namespace {

// The prompt under construction; adjacent pieces of the same kind are joined.
class Pieces {
public:
    void markup(std::string_view s) { add(s, true); }
    void text(std::string_view s) { add(s, false); }
    void append(const Pieces& other) {
        for (const PromptPiece& p : other.list_) add(p.text, p.markup);
    }
    std::vector<PromptPiece> take() { return std::move(list_); }

private:
    void add(std::string_view s, bool markup) {
        if (s.empty()) return;
        if (!list_.empty() && list_.back().markup == markup) list_.back().text += s;
        else list_.push_back({std::string(s), markup});
    }
    std::vector<PromptPiece> list_;
};

struct Block {
    bool tool_result;
    std::string text;
    std::string tool_use_id;
};

// A message after tool merging: users carry blocks.
struct Turn {
    const Message* source;
    std::string role;
    std::vector<Block> blocks;
    bool has_blocks = false;
};

void render_tools(const ojson& tools, const std::string& where, Pieces& out) {
    out.markup(dsv4::tools_head);
    for (std::size_t i = 0; i < tools.size(); ++i) {
        const ojson& t = tools[i];
        if (!t.is_object() || !t.contains("function"))
            throw_usage(where + ".tools[" + std::to_string(i) + "]: expected {\"type\": \"function\", \"function\": {...}}");
        if (i) out.markup("\n");
        out.text(aff::tokenizer::py_json_dumps(t["function"]));
    }
    out.markup(dsv4::tools_tail);
}

// The reference reads the arguments as JSON and writes each top-level member as one
// parameter: strings raw with string="true", anything else as JSON with string="false".
// Arguments that are not a JSON object become one string parameter named "arguments".
void render_arguments(const ToolCall& call, Pieces& out) {
    ojson args;
    try {
        args = ojson::parse(call.arguments_json);
    } catch (const ojson::exception&) {
        args = nullptr;
    }
    if (!args.is_object()) args = ojson{{"arguments", call.arguments_json}};
    bool first = true;
    for (const auto& [key, value] : args.items()) {
        if (!first) out.markup("\n");
        first = false;
        bool is_string = value.is_string();
        out.markup("<" + std::string(dsv4::dsml) + "parameter name=\"");
        out.text(key);
        out.markup(std::string("\" string=\"") + (is_string ? "true" : "false") + "\">");
        out.text(is_string ? value.get<std::string>() : aff::tokenizer::py_json_dumps(value));
        out.markup("</" + std::string(dsv4::dsml) + "parameter>");
    }
}

void render_tool_calls(const std::vector<ToolCall>& calls, Pieces& out) {
    const std::string dsml(dsv4::dsml);
    out.markup("\n\n<" + dsml + "tool_calls>\n");
    for (std::size_t i = 0; i < calls.size(); ++i) {
        if (i) out.markup("\n");
        out.markup("<" + dsml + "invoke name=\"");
        out.text(calls[i].name);
        out.markup("\">\n");
        render_arguments(calls[i], out);
        out.markup("\n</" + dsml + "invoke>");
    }
    out.markup("\n</" + dsml + "tool_calls>");
}

std::vector<Turn> merge_tool_messages(const std::vector<Message>& messages) {
    std::vector<Turn> merged;
    for (const Message& m : messages) {
        if (m.role == "tool") {
            Block b{true, m.content, m.tool_call_id};
            if (!merged.empty() && merged.back().role == "user" && merged.back().has_blocks) {
                merged.back().blocks.push_back(std::move(b));
            } else {
                merged.push_back(Turn{&m, "user", {std::move(b)}, true});
            }
        } else if (m.role == "user") {
            Block b{false, m.content, {}};
            if (!merged.empty() && merged.back().role == "user" && merged.back().has_blocks) {
                merged.back().blocks.push_back(std::move(b));
            } else {
                merged.push_back(Turn{&m, "user", {std::move(b)}, true});
            }
        } else {
            merged.push_back(Turn{&m, m.role, {}, false});
        }
    }
    return merged;
}

void sort_tool_results(std::vector<Turn>& turns) {
    std::map<std::string, std::size_t> order;
    for (Turn& t : turns) {
        if (t.role == "assistant" && !t.source->tool_calls.empty()) {
            order.clear();
            for (std::size_t i = 0; i < t.source->tool_calls.size(); ++i)
                if (!t.source->tool_calls[i].id.empty()) order[t.source->tool_calls[i].id] = i;
        } else if (t.role == "user" && t.has_blocks) {
            std::vector<Block> results;
            for (const Block& b : t.blocks)
                if (b.tool_result) results.push_back(b);
            if (results.size() <= 1 || order.empty()) continue;
            auto rank = [&](const Block& b) {
                auto it = order.find(b.tool_use_id);
                return it == order.end() ? std::size_t(0) : it->second;
            };
            std::stable_sort(results.begin(), results.end(),
                             [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
            std::size_t next = 0;
            for (Block& b : t.blocks)
                if (b.tool_result) b = results[next++];
        }
    }
}

std::ptrdiff_t last_user_index(const std::vector<Turn>& turns) {
    for (std::size_t i = turns.size(); i-- > 0;)
        if (turns[i].role == "user" || turns[i].role == "developer") return std::ptrdiff_t(i);
    return -1;
}

std::vector<Turn> drop_thinking_turns(const std::vector<Turn>& turns) {
    std::ptrdiff_t last = last_user_index(turns);
    std::vector<Turn> kept;
    for (std::size_t i = 0; i < turns.size(); ++i) {
        const std::string& r = turns[i].role;
        if (r == "user" || r == "system" || r == "latest_reminder" || std::ptrdiff_t(i) >= last || r == "assistant")
            kept.push_back(turns[i]);
        // developer turns before the last user turn are dropped; assistant turns lose
        // their reasoning, which render() already omits for them.
    }
    return kept;
}

void system_extras(const Message& m, const std::string& where, Pieces& out) {
    if (!m.tools.is_null() && !m.tools.empty()) {
        out.markup("\n\n");
        render_tools(m.tools, where, out);
    }
    if (!m.response_format.is_null()) {
        out.markup("\n\n" + std::string(dsv4::response_format_head));
        out.text(aff::tokenizer::py_json_dumps(m.response_format));
    }
}

Pieces render_turn(std::size_t index, const std::vector<Turn>& turns, const RenderOptions& opt, bool drop) {
    const Turn& t = turns[index];
    const Message& m = *t.source;
    const bool thinking = opt.mode == ThinkingMode::thinking;
    const std::ptrdiff_t last_user = last_user_index(turns);
    const std::string where = "message with role " + t.role;
    Pieces out;
    if (index == 0 && thinking && opt.effort == ReasoningEffort::max) out.markup(dsv4::reasoning_effort_max);

    if (t.role == "system") {
        out.text(m.content);
        system_extras(m, where, out);
    } else if (t.role == "developer") {
        if (m.content.empty()) throw_usage("developer message with empty content");
        out.markup(dsv4::user);
        out.text(m.content);
        system_extras(m, where, out);
    } else if (t.role == "user") {
        out.markup(dsv4::user);
        for (std::size_t i = 0; i < t.blocks.size(); ++i) {
            if (i) out.markup("\n\n");
            const Block& b = t.blocks[i];
            if (b.tool_result) out.markup(dsv4::tool_result_open);
            out.text(b.text);
            if (b.tool_result) out.markup(dsv4::tool_result_close);
        }
    } else if (t.role == "latest_reminder") {
        out.markup(dsv4::latest_reminder);
        out.text(m.content);
    } else if (t.role == "assistant") {
        if (thinking && (!drop || std::ptrdiff_t(index) > last_user)) {
            out.text(m.reasoning);
            out.markup(dsv4::think_end);
        }
        out.text(m.content);
        if (!m.tool_calls.empty()) render_tool_calls(m.tool_calls, out);
        if (!m.without_eos) out.markup(dsv4::eos);
    } else {
        throw_usage("unknown message role \"" + t.role + "\"");
    }

    if (index + 1 < turns.size() && turns[index + 1].role != "assistant" && turns[index + 1].role != "latest_reminder")
        return out;
    if (t.role == "user" || t.role == "developer") {
        out.markup(dsv4::assistant);
        bool open_thinking = thinking && (!drop || std::ptrdiff_t(index) >= last_user);
        out.markup(open_thinking ? dsv4::think_start : dsv4::think_end);
    }
    return out;
}

}  // namespace

std::vector<PromptPiece> render_prompt_pieces(const std::vector<Message>& input, const ojson& tools,
                                              const RenderOptions& opt, const ojson& response_format) {
    std::vector<Message> messages = input;
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const std::string& r = messages[i].role;
        if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool" && r != "latest_reminder")
            throw_usage("messages[" + std::to_string(i) + "].role: unknown role \"" + r + "\"");
    }
    bool has_tools = !tools.is_null() && !tools.empty();
    bool has_format = !response_format.is_null();
    if (has_tools || has_format) {
        auto sys = std::find_if(messages.begin(), messages.end(), [](const Message& m) { return m.role == "system"; });
        if (sys == messages.end()) {
            Message empty_system;
            empty_system.role = "system";
            sys = messages.insert(messages.begin(), std::move(empty_system));
        }
        if (has_tools) {
            for (const Message& m : messages)
                if (!m.tools.is_null() && !m.tools.empty())
                    throw_usage("tools given both for the request and on a message");
            if (!tools.is_array()) throw_usage("tools: expected an array");
            sys->tools = tools;
        }
        if (has_format) {
            if (!sys->response_format.is_null()) throw_usage("response_format given both for the request and on a message");
            sys->response_format = response_format;
        }
    }

    std::vector<Turn> turns = merge_tool_messages(messages);
    sort_tool_results(turns);
    bool drop = opt.drop_thinking;
    for (const Message& m : messages)
        if (!m.tools.is_null() && !m.tools.empty()) drop = false;
    if (opt.mode == ThinkingMode::thinking && drop) turns = drop_thinking_turns(turns);

    Pieces prompt;
    if (opt.add_bos) prompt.markup(dsv4::bos);
    for (std::size_t i = 0; i < turns.size(); ++i) {
        try {
            prompt.append(render_turn(i, turns, opt, drop));
        } catch (Error& e) {
            e.add_context("turn " + std::to_string(i));
            throw;
        }
    }
    return prompt.take();
}

std::string render_prompt(const std::vector<Message>& messages, const ojson& tools, const RenderOptions& opt,
                          const ojson& response_format) {
    std::string prompt;
    for (const PromptPiece& p : render_prompt_pieces(messages, tools, opt, response_format)) prompt += p.text;
    return prompt;
}

// ---------------------------------------------------------------------------------------

namespace {

// Tool results given as a list of parts are joined by "\n\n" as the reference does for
// tool_result blocks; for other roles the reference has no rule and the parts are simply
// concatenated.
std::string text_of(const ojson& content, const std::string& where, std::string_view separator) {
    if (content.is_null()) return {};
    if (content.is_string()) return content.get<std::string>();
    if (content.is_array()) {
        std::string out;
        for (std::size_t i = 0; i < content.size(); ++i) {
            const ojson& part = content[i];
            std::string w = where + "[" + std::to_string(i) + "]";
            if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
                throw_usage(w + ": only {\"type\": \"text\", \"text\": ...} parts are supported");
            if (i) out += separator;
            out += part["text"].get<std::string>();
        }
        return out;
    }
    throw_usage(where + ": expected a string, null or a list of text parts");
}

std::string string_field(const ojson& obj, const char* key, const std::string& where) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return {};
    if (!it->is_string()) throw_usage(where + "." + key + ": expected a string");
    return it->get<std::string>();
}

}  // namespace

std::vector<Message> messages_from_openai(const ojson& list) {
    if (!list.is_array()) throw_usage("messages: expected an array");
    std::vector<Message> out;
    for (std::size_t i = 0; i < list.size(); ++i) {
        std::string where = "messages[" + std::to_string(i) + "]";
        const ojson& j = list[i];
        if (!j.is_object()) throw_usage(where + ": expected an object");
        Message m;
        m.role = string_field(j, "role", where);
        if (m.role.empty()) throw_usage(where + ".role: missing");
        m.content = text_of(j.contains("content") ? j["content"] : ojson(), where + ".content",
                            m.role == "tool" ? "\n\n" : "");
        m.reasoning = string_field(j, "reasoning_content", where);
        m.tool_call_id = string_field(j, "tool_call_id", where);
        if (j.contains("tools")) m.tools = j["tools"];
        if (j.contains("response_format")) m.response_format = j["response_format"];
        if (auto it = j.find("tool_calls"); it != j.end() && !it->is_null()) {
            if (!it->is_array()) throw_usage(where + ".tool_calls: expected an array");
            for (std::size_t k = 0; k < it->size(); ++k) {
                std::string w = where + ".tool_calls[" + std::to_string(k) + "]";
                const ojson& c = (*it)[k];
                if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
                    throw_usage(w + ".function: missing");
                const ojson& f = c["function"];
                ToolCall call;
                call.id = string_field(c, "id", w);
                call.name = string_field(f, "name", w + ".function");
                if (call.name.empty()) throw_usage(w + ".function.name: missing");
                auto a = f.find("arguments");
                if (a == f.end() || a->is_null()) call.arguments_json = "{}";
                else if (a->is_string()) call.arguments_json = a->get<std::string>();
                else call.arguments_json = a->dump();
                m.tool_calls.push_back(std::move(call));
            }
        }
        out.push_back(std::move(m));
    }
    return out;
}

}  // namespace aff::chat
