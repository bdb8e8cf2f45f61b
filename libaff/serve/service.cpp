// The OpenAI API mapped onto HTTP (see service.hpp).
#include "libaff/serve/service.hpp"

#include "libaff/core/error.hpp"
#include "libaff/serve/generation.hpp"
#include "libaff/serve/llama_endpoints.hpp"
#include "libaff/serve/openai_response.hpp"
#include "libaff/serve/sse.hpp"
#include "libaff/tokenizer/dsv4_strings.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

namespace aff::serve {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

ApiError error(int status, std::string message, std::string type, std::string code = {}, std::string param = {}) {
    ApiError e;
    e.status = status;
    e.message = std::move(message);
    e.type = std::move(type);
    e.code = std::move(code);
    e.param = std::move(param);
    return e;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
    unsigned diff = a.size() == b.size() ? 0u : 1u;
    for (std::size_t i = 0; i < a.size(); ++i) diff |= unsigned(a[i] ^ (i < b.size() ? b[i] : 0));
    return diff == 0;
}

GenerationParams generation_params(const SamplingRequest& s, std::size_t max_tokens, const ServiceOptions& o) {
    GenerationParams p;
    p.max_tokens = max_tokens;
    p.sampling.temperature = s.temperature.value_or(o.default_temperature);
    p.sampling.top_p = s.top_p.value_or(o.default_top_p);
    p.sampling.top_k = s.top_k.value_or(0);
    p.sampling.min_p = s.min_p.value_or(0.0f);
    p.sampling.seed = s.seed ? *s.seed : std::random_device{}() * 0x9E3779B97F4A7C15ull + std::random_device{}();
    p.stop = s.stop;
    p.logprobs = s.logprobs;
    return p;
}

std::string escape_for_log(const std::string& text) {
    return json(text).dump(-1, ' ', true, json::error_handler_t::replace);
}

}  // namespace

Service::Service(ServiceOptions options) : options_(std::move(options)), scheduler_(options_.max_waiting) {}

void Service::set_engine(std::unique_ptr<Engine> engine) {
    engine_ = std::move(engine);
    // Indexed once: every constrained request masks over these bytes.
    std::vector<std::string> bytes(engine_->vocab_size());
    std::vector<std::int32_t> ends;
    for (std::size_t id = 0; id < bytes.size(); ++id) {
        if (engine_->is_end_token(std::int32_t(id))) ends.push_back(std::int32_t(id));
        else bytes[id] = engine_->token_text(std::int32_t(id));
    }
    token_bytes_ = std::make_shared<TokenBytes>(std::move(bytes), std::move(ends));
    if (options_.model_id.empty()) options_.model_id = engine_->model_id();
    ready_.store(true);
}

std::size_t Service::context_size() const {
    const std::size_t engine_ctx = engine_->context_size();
    return options_.ctx_size ? std::min(options_.ctx_size, engine_ctx) : engine_ctx;
}

Service::Outcome Service::send_json(HttpResponse& response, int status, const json& body, const HttpHeaders& extra) {
    response.send(status, "application/json", dump(body) + "\n", extra);
    Outcome o;
    o.status = status;
    return o;
}

Service::Outcome Service::send_error(HttpResponse& response, const ApiError& e, const HttpHeaders& extra) {
    return send_json(response, e.status, e.to_json(), extra);
}

void Service::reject(const HttpRequest& request, int status, const std::string& message, HttpResponse& response) {
    const auto start = Clock::now();
    HttpHeaders extra;
    if (status == 503) extra.emplace_back("Retry-After", std::to_string(options_.retry_after_s));
    const std::string type = status >= 500 ? "server_error" : "invalid_request_error";
    Outcome o = send_error(response, error(status, message, type), extra);
    metrics_.count_request(request.path, status);
    log_line(request, o, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
}

void Service::handle(const HttpRequest& request, HttpResponse& response) {
    const auto start = Clock::now();
    Outcome o;
    try {
        if (!cors(request, response, o)) o = route(request, response, start);
    } catch (const std::exception& e) {
        // An engine failure: the request cannot be completed; the server goes on.
        if (!response.started()) {
            o = send_error(response, error(500, std::string("internal error: ") + e.what(), "server_error"));
        } else {
            response.write(sse_event(error(500, std::string("internal error: ") + e.what(), "server_error").to_json()));
            response.close_after();
            o.status = 500;
        }
    }
    metrics_.count_request(request.path, o.status);
    log_line(request, o, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
}

void Service::log_line(const HttpRequest& request, const Outcome& o, double ms) {
    if (!options_.log) return;
    char line[512];
    std::snprintf(line, sizeof line, "%s %s %d prompt=%zu cached=%zu completion=%zu %.0fms",
                  request.method.empty() ? "-" : request.method.c_str(),
                  request.path.empty() ? "-" : request.path.substr(0, 200).c_str(), o.status, o.prompt_tokens,
                  o.cached_tokens, o.completion_tokens, ms);
    std::lock_guard lock(log_mutex_);
    options_.log(line);
    if (options_.log_prompts && !o.prompt_log.empty()) options_.log("  prompt: " + o.prompt_log);
}

// CORS for browser front ends, off unless --cors-origin names origins: an allowed
// Origin gets Access-Control-Allow-Origin on every answer, and its preflight (OPTIONS
// with Access-Control-Request-Method) is answered here, before authentication, as
// browsers send it without credentials.
bool Service::cors(const HttpRequest& request, HttpResponse& response, Outcome& preflight) {
    if (options_.cors_origins.empty()) return false;
    const auto origin = request.header("origin");
    if (!origin) return false;
    const bool any = std::find(options_.cors_origins.begin(), options_.cors_origins.end(), "*") != options_.cors_origins.end();
    const bool listed =
        std::find(options_.cors_origins.begin(), options_.cors_origins.end(), *origin) != options_.cors_origins.end();
    if (!any && !listed) return false;
    response.add_header("Access-Control-Allow-Origin", any ? "*" : std::string(*origin));
    if (!any) response.add_header("Vary", "Origin");
    if (request.method != "OPTIONS" || !request.header("access-control-request-method")) return false;
    response.send(204, "", "",
                  {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                   {"Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key"},
                   {"Access-Control-Max-Age", "600"}});
    preflight.status = 204;
    return true;
}

std::function<void()> Service::token_timer(Clock::time_point arrival) {
    auto last = std::make_shared<std::optional<Clock::time_point>>();
    return [this, arrival, last] {
        const auto now = Clock::now();
        if (!*last) metrics_.observe_first_token(std::chrono::duration<double>(now - arrival).count());
        else metrics_.observe_token_interval(std::chrono::duration<double>(now - **last).count());
        *last = now;
    };
}

Service::Outcome Service::route(const HttpRequest& request, HttpResponse& response, Clock::time_point arrival) {
    const std::string& path = request.path;
    if (path == "/health") {
        if (request.method != "GET") return send_error(response, error(405, "use GET for /health", "invalid_request_error"), {{"Allow", "GET"}});
        return ready_ ? send_json(response, 200, {{"status", "ok"}})
                      : send_json(response, 503, {{"status", "loading"}}, {{"Retry-After", std::to_string(options_.retry_after_s)}});
    }
    if (!options_.api_key.empty()) {
        // Either header carries the key (OpenAI's clients send the first, Anthropic-style ones the second).
        const auto auth = request.header("authorization");
        const auto x_key = request.header("x-api-key");
        const bool ok = (auth && constant_time_equal(*auth, "Bearer " + options_.api_key)) ||
                        (x_key && constant_time_equal(*x_key, options_.api_key));
        if (!ok)
            return send_error(response, error(401, auth || x_key ? "Incorrect API key provided."
                                                                 : "Missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'.",
                                              "invalid_request_error", "invalid_api_key"),
                              {{"WWW-Authenticate", "Bearer"}});
    }
    auto only = [&](const char* method) -> std::optional<Outcome> {
        if (request.method == method) return std::nullopt;
        return send_error(response, error(405, std::string("use ") + method + " for " + path, "invalid_request_error"),
                          {{"Allow", method}});
    };
    if (path == "/metrics") {
        if (auto o = only("GET")) return *o;
        response.send(200, "text/plain; version=0.0.4",
                      metrics_.render(scheduler_.waiting(), scheduler_.busy(), ready_,
                                      ready_ ? engine_->prefix_cache_stats() : std::nullopt,
                                      ready_ ? engine_->tier_stats() : std::nullopt));
        Outcome o;
        o.status = 200;
        return o;
    }
    if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0) {
        if (auto o = only("GET")) return *o;
        const std::string id = options_.model_id.empty() && ready_ ? engine_->model_id() : options_.model_id;
        const json model = {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "aff"}};
        if (path == "/v1/models") return send_json(response, 200, {{"object", "list"}, {"data", json::array({model})}});
        const std::string asked = path.substr(11);
        if (asked != id)
            return send_error(response, error(404, "The model '" + asked + "' does not exist", "invalid_request_error", "model_not_found", "model"));
        return send_json(response, 200, model);
    }
    if (path == "/v1/chat/completions") {
        if (auto o = only("POST")) return *o;
        return chat(request, response, arrival);
    }
    if (path == "/v1/completions") {
        if (auto o = only("POST")) return *o;
        return completion(request, response, arrival);
    }
    if (path == "/tokenize" || path == "/detokenize" || path == "/apply-template" || path == "/props") {
        if (auto o = only(path == "/props" ? "GET" : "POST")) return *o;
        return utility(request, response);
    }
    return send_error(response, error(404, "Unknown path " + path.substr(0, 200), "invalid_request_error", "unknown_url"));
}

// llama-server's utility endpoints: answered at once from the tokenizer and the chat
// encoding, outside the generation queue.
Service::Outcome Service::utility(const HttpRequest& request, HttpResponse& response) {
    if (!ready_)
        return send_error(response, error(503, "the model is still loading", "server_error", "model_loading"),
                          {{"Retry-After", std::to_string(options_.retry_after_s)}});
    const std::string& path = request.path;
    if (path == "/props") {
        ServerSettings s;
        s.model_id = options_.model_id;
        s.context_size = context_size();
        s.temperature = options_.default_temperature;
        s.top_p = options_.default_top_p;
        s.thinking = options_.default_thinking;
        s.max_tokens_floor = options_.max_tokens_floor;
        s.queue_size = options_.max_waiting;
        return send_json(response, 200, props_reply(*engine_, s));
    }
    try {
        if (path == "/tokenize") {
            auto parsed = parse_tokenize_request(request.body);
            if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(response, *e);
            return send_json(response, 200, tokenize_reply(*engine_, std::get<TokenizeRequest>(parsed)));
        }
        if (path == "/detokenize") {
            auto parsed = parse_detokenize_request(request.body);
            if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(response, *e);
            const DetokenizeRequest& r = std::get<DetokenizeRequest>(parsed);
            for (std::size_t i = 0; i < r.tokens.size(); ++i)
                if (std::size_t(r.tokens[i]) >= engine_->vocab_size())
                    return send_error(response, error(400, "tokens[" + std::to_string(i) + "] = " + std::to_string(r.tokens[i]) +
                                                               " is not a token id (vocabulary of " +
                                                               std::to_string(engine_->vocab_size()) + ")",
                                                       "invalid_request_error", "invalid_value", "tokens"));
            return send_json(response, 200, detokenize_reply(*engine_, r));
        }
        auto parsed = parse_chat_request(request.body, options_.default_thinking);
        if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(response, *e);
        return send_json(response, 200, apply_template_reply(*engine_, prompt_shown(std::get<ChatRequest>(parsed))));
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::usage) throw;
        return send_error(response, error(400, e.what(), "invalid_request_error", "invalid_value"));
    }
}

// response_format json_object / json_schema: the reply is one JSON value of the grammar.
// tool_choice "required" or a named function: the reply opens the chat encoding's
// tool-call block with one of the shown tools' names; the call's arguments are the
// model's. A thinking reply is constrained only after its reasoning ends.
std::shared_ptr<TokenConstraint> Service::constraint_for(const ChatRequest& r, const ChatPrompt& prompt) const {
    const std::string after = prompt.thinking ? std::string(chat::dsv4::think_end) : "";
    if (r.grammar) return std::make_shared<JsonConstraint>(token_bytes_, r.grammar, after);
    if ((r.tool_choice == "required" || r.tool_choice == "function") && !prompt.tools.empty()) {
        // As the chat encoding writes a call (chat_render.cpp's render_tool_calls).
        const std::string dsml(chat::dsv4::dsml);
        std::vector<std::string> openings;
        for (const auto& t : prompt.tools)
            openings.push_back("\n\n<" + dsml + "tool_calls>\n<" + dsml + "invoke name=\"" +
                               t["function"].value("name", "") + "\">\n");
        return std::make_shared<PrefixConstraint>(token_bytes_, std::move(openings), after);
    }
    return nullptr;
}

std::optional<ApiError> Service::check_ready_and_fit(std::size_t prompt_tokens) const {
    const std::size_t ctx = context_size();
    if (prompt_tokens >= ctx)
        return error(400,
                     "This model's maximum context length is " + std::to_string(ctx) + " tokens; the prompt is " +
                         std::to_string(prompt_tokens) + " tokens, which leaves no room for a reply.",
                     "invalid_request_error", "context_length_exceeded", "messages");
    return std::nullopt;
}

// Waits for this request's turn to generate. Returns the outcome to report instead
// when the queue is full (503 with Retry-After) or the client left while waiting;
// `pending` is what the request has recorded so far (prompt tokens, logged prompt).
std::optional<Service::Outcome> Service::wait_for_turn(Scheduler::Turn& turn, HttpResponse& response,
                                                      const Outcome& pending) {
    switch (scheduler_.acquire(turn, [&] { return response.client_gone(); })) {
        case Scheduler::Admission::granted: return std::nullopt;
        case Scheduler::Admission::queue_full: {
            metrics_.count_rejected_full();
            Outcome o = send_error(response, error(503, "the server is busy: the request queue is full, retry later",
                                                   "server_error", "queue_full"),
                                   {{"Retry-After", std::to_string(options_.retry_after_s)}});
            o.prompt_tokens = pending.prompt_tokens;
            return o;
        }
        case Scheduler::Admission::closed: {
            response.close_after();
            Outcome o = send_error(response, error(503, "the server is shutting down", "server_error", "shutting_down"));
            o.prompt_tokens = pending.prompt_tokens;
            return o;
        }
        case Scheduler::Admission::cancelled: break;
    }
    Outcome gone = pending;
    gone.status = 499;  // client closed the request (nginx's convention), never sent
    response.abandon();
    return gone;
}

void Service::begin_shutdown() { scheduler_.close(); }

void Service::settle_cut(GenerationResult& result, bool client_ok, HttpResponse& response) const {
    if (result.finish == FinishReason::cancelled && cut_ && client_ok && !response.client_gone())
        result.finish = FinishReason::length;
}

// Books a finished generation (metrics, the end of this request's turn, its token
// count). Returns true when the client went away: `out` is then final and nothing
// more is sent.
bool Service::settle_generation(const GenerationResult& result, Scheduler::Turn& turn, bool stream,
                                HttpResponse& response, Outcome& out) {
    metrics_.add_generation(result.prompt_tokens, result.cached_tokens, result.prompt_ms / 1000.0,
                            result.completion_tokens, result.decode_ms / 1000.0);
    if (result.drafting) metrics_.add_drafts(result.verify_calls, result.drafted_at, result.accepted_at);
    out.cached_tokens = result.cached_tokens;
    turn.release();
    out.completion_tokens = result.completion_tokens;
    if (result.finish != FinishReason::cancelled) return false;
    metrics_.count_cancelled();
    out.status = stream ? 200 : 499;
    if (stream) response.close_after();
    else response.abandon();
    return true;
}

// The end of a successful reply, the same for both endpoints. Streamed: the chunk that
// carries the finish reason gets the timings, a usage chunk with no choices follows when
// the client asked for it, then [DONE]. Not streamed: the body gets usage and timings.
Service::Outcome Service::send_reply(HttpResponse& response, bool stream, json reply, json usage_chunk,
                                     bool include_usage, const GenerationResult& result, Outcome out) {
    reply["timings"] = timings_json(result);
    if (!stream) {
        reply["usage"] = usage_json(result);
        send_json(response, 200, reply);
    } else {
        response.write(sse_event(reply));
        if (include_usage) {
            usage_chunk["choices"] = json::array();
            usage_chunk["usage"] = usage_json(result);
            response.write(sse_event(usage_chunk));
        }
        response.write(sse_done());
        response.end_stream();
    }
    out.status = 200;
    return out;
}

Service::Outcome Service::chat(const HttpRequest& request, HttpResponse& response, Clock::time_point arrival) {
    auto parsed = parse_chat_request(request.body, options_.default_thinking);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(response, *e);
    ChatRequest& r = std::get<ChatRequest>(parsed);
    if (!ready_)
        return send_error(response, error(503, "the model is still loading", "server_error", "model_loading"),
                          {{"Retry-After", std::to_string(options_.retry_after_s)}});
    const ChatPrompt prompt = prompt_shown(r);
    std::vector<std::int32_t> tokens;
    try {
        tokens = engine_->render_chat(prompt);
    } catch (const Error& e) {
        return send_error(response, error(400, e.what(), "invalid_request_error", "invalid_value", "messages"));
    }
    Outcome out;
    out.prompt_tokens = tokens.size();
    if (options_.log_prompts) out.prompt_log = escape_for_log(request.body);
    if (auto e = check_ready_and_fit(tokens.size())) {
        Outcome o = send_error(response, *e);
        o.prompt_tokens = tokens.size();
        return o;
    }
    const std::size_t room = context_size() - tokens.size();
    std::size_t max_tokens = r.sampling.max_tokens.value_or(room);
    if (options_.max_tokens_floor > 0) max_tokens = std::max(max_tokens, options_.max_tokens_floor);
    max_tokens = std::min(max_tokens, room);
    GenerationParams params = generation_params(r.sampling, max_tokens, options_);
    params.constraint = constraint_for(r, prompt);

    ObservedRequest watch(options_.observer, tokens.size());
    Scheduler::Turn turn;
    if (std::optional<Outcome> refused = wait_for_turn(turn, response, out)) return *refused;
    watch.started();

    const std::string model = options_.model_id;
    ChatReplyBuilder builder(random_id("chatcmpl-"), model, unix_now());
    auto parser = engine_->chat_parser(prompt);
    std::vector<ChatEvent> events;
    json pending_logprobs = json::array();
    const bool stream = r.sampling.stream;
    bool client_ok = true;
    auto write_deltas = [&](const std::vector<json>& deltas) {
        for (const auto& d : deltas) {
            json lp = nullptr;
            if (params.logprobs >= 0 && !pending_logprobs.empty()) {
                lp = {{"content", pending_logprobs}};
                pending_logprobs = json::array();
            }
            client_ok = client_ok && response.write(sse_event(builder.chunk(d, nullptr, lp)));
        }
    };
    json all_logprobs = json::array();
    if (stream) {
        client_ok = response.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
        client_ok = client_ok && response.write(sse_event(builder.chunk({{"role", "assistant"}, {"content", ""}})));
    }
    GenerateHooks hooks;
    hooks.cancelled = [&] { return !client_ok || cut_ || response.client_gone(); };
    const std::function<void()> timed = token_timer(arrival);
    hooks.on_step = [&](const GenerationStep& step) {
        timed();
        events.clear();
        parser->feed(step.text, events);
        if (step.logprob) {
            const json entry = chat_logprob_entry(*engine_, *step.logprob);
            (stream ? pending_logprobs : all_logprobs).push_back(entry);
        }
        auto deltas = builder.deltas(events);
        if (stream) write_deltas(deltas);
        return client_ok && !cut_;
    };
    GenerationResult result = generate(*engine_, tokens, params, watch.observe(std::move(hooks), *engine_));
    settle_cut(result, client_ok, response);
    if (settle_generation(result, turn, stream, response, out)) return out;
    events.clear();
    parser->finish(events);
    auto deltas = builder.deltas(events);
    const std::string finish = builder.finish_reason(result.finish);
    if (stream) {
        write_deltas(deltas);
        json last = builder.chunk(json::object(), finish,
                                  pending_logprobs.empty() || params.logprobs < 0 ? json(nullptr)
                                                                                  : json{{"content", pending_logprobs}});
        return send_reply(response, true, std::move(last), builder.chunk(json::object()), r.sampling.include_usage,
                          result, std::move(out));
    }
    json body = builder.chunk(json::object());
    body["object"] = "chat.completion";
    body["choices"] = json::array({{{"index", 0},
                                    {"message", builder.message()},
                                    {"logprobs", params.logprobs >= 0 ? json{{"content", all_logprobs}} : json(nullptr)},
                                    {"finish_reason", finish}}});
    return send_reply(response, false, std::move(body), nullptr, false, result, std::move(out));
}

Service::Outcome Service::completion(const HttpRequest& request, HttpResponse& response, Clock::time_point arrival) {
    auto parsed = parse_completion_request(request.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(response, *e);
    CompletionRequest& r = std::get<CompletionRequest>(parsed);
    if (!ready_)
        return send_error(response, error(503, "the model is still loading", "server_error", "model_loading"),
                          {{"Retry-After", std::to_string(options_.retry_after_s)}});
    std::vector<std::int32_t> tokens;
    if (r.prompt_is_tokens) {
        for (std::size_t i = 0; i < r.prompt_tokens.size(); ++i)
            if (std::size_t(r.prompt_tokens[i]) >= engine_->vocab_size())
                return send_error(response, error(400, "prompt[" + std::to_string(i) + "] = " + std::to_string(r.prompt_tokens[i]) +
                                                           " is not a token id (vocabulary of " + std::to_string(engine_->vocab_size()) + ")",
                                                   "invalid_request_error", "invalid_value", "prompt"));
        tokens = r.prompt_tokens;
    } else {
        try {
            tokens = engine_->tokenize(r.prompt_text, true);
        } catch (const Error& e) {
            return send_error(response, error(400, e.what(), "invalid_request_error", "invalid_value", "prompt"));
        }
    }
    Outcome out;
    out.prompt_tokens = tokens.size();
    if (options_.log_prompts) out.prompt_log = escape_for_log(request.body);
    if (auto e = check_ready_and_fit(tokens.size())) {
        ApiError err = *e;
        err.param = "prompt";
        Outcome o = send_error(response, err);
        o.prompt_tokens = tokens.size();
        return o;
    }
    const std::size_t room = context_size() - tokens.size();
    // OpenAI's default for this endpoint is 16; no reasoning happens here, so no floor.
    const std::size_t max_tokens = std::min(r.sampling.max_tokens.value_or(16), room);
    const GenerationParams params = generation_params(r.sampling, max_tokens, options_);

    ObservedRequest watch(options_.observer, tokens.size());
    Scheduler::Turn turn;
    if (std::optional<Outcome> refused = wait_for_turn(turn, response, out)) return *refused;
    watch.started();
    const std::string id = random_id("cmpl-");
    const std::int64_t created = unix_now();
    auto chunk = [&](const std::string& text, const json& finish, const json& logprobs) {
        return json{{"id", id},
                    {"object", "text_completion"},
                    {"created", created},
                    {"model", options_.model_id},
                    {"system_fingerprint", nullptr},
                    {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
    };
    // OpenAI's legacy logprobs: parallel arrays.
    json lp_tokens = json::array(), lp_values = json::array(), lp_top = json::array(), lp_offsets = json::array();
    std::size_t text_offset = 0;
    auto add_logprob = [&](const StepLogprob& lp) {
        const std::string t = engine_->token_text(lp.token);
        lp_tokens.push_back(t);
        lp_values.push_back(lp.logprob);
        json top = json::object();
        for (const auto& alt : lp.top) top[engine_->token_text(alt.token)] = alt.logprob;
        lp_top.push_back(top);
        lp_offsets.push_back(text_offset);
        text_offset += t.size();
    };
    auto logprobs_json = [&] {
        return json{{"tokens", lp_tokens}, {"token_logprobs", lp_values}, {"top_logprobs", lp_top}, {"text_offset", lp_offsets}};
    };
    const bool stream = r.sampling.stream;
    bool client_ok = true;
    if (stream) client_ok = response.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
    GenerateHooks hooks;
    hooks.cancelled = [&] { return !client_ok || cut_ || response.client_gone(); };
    const std::function<void()> timed = token_timer(arrival);
    hooks.on_step = [&](const GenerationStep& step) {
        timed();
        if (step.logprob) add_logprob(*step.logprob);
        if (stream && (!step.text.empty() || step.logprob)) {
            json lp = nullptr;
            if (params.logprobs >= 0) {
                lp = logprobs_json();
                lp_tokens = json::array(), lp_values = json::array(), lp_top = json::array(), lp_offsets = json::array();
            }
            client_ok = client_ok && response.write(sse_event(chunk(step.text, nullptr, lp)));
        }
        return client_ok && !cut_;
    };
    GenerationResult result = generate(*engine_, tokens, params, watch.observe(std::move(hooks), *engine_));
    settle_cut(result, client_ok, response);
    if (settle_generation(result, turn, stream, response, out)) return out;
    const std::string finish = to_string(result.finish);
    if (stream)
        return send_reply(response, true, chunk("", finish, nullptr), chunk("", nullptr, nullptr),
                          r.sampling.include_usage, result, std::move(out));
    json body = chunk(result.text, finish, params.logprobs >= 0 ? logprobs_json() : json(nullptr));
    return send_reply(response, false, std::move(body), nullptr, false, result, std::move(out));
}

}  // namespace aff::serve
