// The OpenAI-compatible API on top of the HTTP server: routing, authentication,
// CORS, request validation, queueing, generation and the answer in either mode (JSON
// or SSE), plus /health, /metrics, llama-server's /tokenize, /detokenize,
// /apply-template and /props (llama_endpoints.hpp), and one log line per request. The engine arrives
// later than the socket (loading a model takes minutes): until set_engine() the
// server answers /health with 503 and generation requests with 503 + Retry-After.
#pragma once

#include "libaff/serve/engine.hpp"
#include "libaff/serve/generation.hpp"
#include "libaff/serve/http_server.hpp"
#include "libaff/serve/metrics.hpp"
#include "libaff/serve/openai_request.hpp"
#include "libaff/serve/request_observer.hpp"
#include "libaff/serve/scheduler.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace aff::serve {

struct ServiceOptions {
    std::string model_id;              // reported by /v1/models and in responses
    std::string api_key;               // empty = no authentication ("Authorization: Bearer" or "x-api-key")
    // Origins whose browser pages may call the API (CORS); "*" allows any; empty = none.
    std::vector<std::string> cors_origins;
    // A chat request's max_tokens is raised to at least this (0 = honour the caller).
    // Reasoning models spend thousands of tokens thinking before they answer; clients
    // written for other models send budgets sized for the answer alone, which would
    // cut the reply off inside its reasoning. The context size still caps it.
    std::size_t max_tokens_floor = 256000;
    std::size_t ctx_size = 0;          // 0 = the engine's context size
    float default_temperature = 1.0f;  // the model card's recommendation
    float default_top_p = 1.0f;
    bool default_thinking = false;     // when a request says nothing about thinking
    std::size_t max_waiting = 64;      // requests queued behind the running one
    int retry_after_s = 5;             // advertised on 503
    bool log_prompts = false;
    std::function<void(const std::string&)> log;  // one line per request; null = silent
    RequestObserver* observer = nullptr;          // sees every generation request (the live view)
};

class Service final : public HttpHandler {
public:
    explicit Service(ServiceOptions options);

    // Makes the server ready (thread-safe; called once, after loading).
    void set_engine(std::unique_ptr<Engine> engine);
    bool ready() const { return ready_.load(); }

    void handle(const HttpRequest& request, HttpResponse& response) override;
    void reject(const HttpRequest& request, int status, const std::string& message, HttpResponse& response) override;

    const Metrics& metrics() const { return metrics_; }

    // A graceful shutdown, in two steps. begin_shutdown(): requests waiting for the
    // engine, and every later one, get 503 (code "shutting_down"); the running
    // generation goes on. cut_generations(), when the grace period is over: the running
    // generation ends at its next token with finish_reason "length" and a complete
    // reply (streams get their final chunk and [DONE]).
    void begin_shutdown();
    void cut_generations() { cut_ = true; }

private:
    struct Outcome {
        int status = 0;
        std::size_t prompt_tokens = 0;
        std::size_t cached_tokens = 0;
        std::size_t completion_tokens = 0;
        std::string prompt_log;  // with --log-prompts
    };

    using Clock = std::chrono::steady_clock;
    Outcome route(const HttpRequest& request, HttpResponse& response, Clock::time_point arrival);
    Outcome chat(const HttpRequest& request, HttpResponse& response, Clock::time_point arrival);
    Outcome completion(const HttpRequest& request, HttpResponse& response, Clock::time_point arrival);
    Outcome utility(const HttpRequest& request, HttpResponse& response);
    // Adds the CORS headers for an allowed Origin; true for a preflight it answered.
    bool cors(const HttpRequest& request, HttpResponse& response, Outcome& preflight);
    // Times each generated token for the latency histograms.
    std::function<void()> token_timer(Clock::time_point arrival);
    bool settle_generation(const GenerationResult& result, Scheduler::Turn& turn, bool stream, HttpResponse& response,
                           Outcome& out);
    std::optional<Outcome> wait_for_turn(Scheduler::Turn& turn, HttpResponse& response, const Outcome& pending);
    Outcome send_reply(HttpResponse& response, bool stream, nlohmann::json reply, nlohmann::json usage_chunk,
                       bool include_usage, const GenerationResult& result, Outcome out);
    Outcome send_error(HttpResponse& response, const ApiError& error, const HttpHeaders& extra = {});
    Outcome send_json(HttpResponse& response, int status, const nlohmann::json& body, const HttpHeaders& extra = {});
    std::optional<ApiError> check_ready_and_fit(std::size_t prompt_tokens) const;
    std::size_t context_size() const;
    void log_line(const HttpRequest& request, const Outcome& outcome, double ms);
    // A generation stopped by cut_generations() for a client still there is an ended
    // reply (finish_reason "length"), not a cancelled one.
    void settle_cut(GenerationResult& result, bool client_ok, HttpResponse& response) const;

    // The constraint structured output or a forced tool call samples under (null: none).
    std::shared_ptr<TokenConstraint> constraint_for(const ChatRequest& request, const ChatPrompt& prompt) const;

    ServiceOptions options_;
    std::unique_ptr<Engine> engine_;
    std::shared_ptr<const TokenBytes> token_bytes_;  // the engine's vocabulary, for constraints
    std::atomic<bool> ready_{false};
    std::atomic<bool> cut_{false};
    Scheduler scheduler_;
    Metrics metrics_;
    std::mutex log_mutex_;
};

}  // namespace aff::serve
