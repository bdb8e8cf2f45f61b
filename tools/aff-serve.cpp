// aff-serve: an OpenAI-compatible HTTP server (chat completions, completions, models,
// health, metrics, and llama-server's tokenize, detokenize, apply-template and props)
// over one engine. The API, queueing and HTTP live in libaff/serve;
// this file maps flags to options, loads the engine and runs the server.
#include "libaff/core/error.hpp"
#include "libaff/core/units.hpp"
#include "libaff/serve/http_server.hpp"
#include "libaff/serve/model_engine.hpp"
#include "libaff/serve/service.hpp"
#include "libaff/serve/test_engine.hpp"
#include "libaff/runtime/open_sequence.hpp"
#include "libaff/ui/cli.hpp"
#include "libaff/ui/live_view.hpp"
#include "libaff/ui/plane_source.hpp"
#include "libaff/ui/route_heat.hpp"
#include "libaff/ui/serve_feed.hpp"
#include "libaff/ui/stats.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

namespace {
// How long a graceful shutdown waits for the running request (man/aff-serve.1).
constexpr int kShutdownGraceS = 10;
}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Serve a model over an OpenAI-compatible HTTP API.", "aff-serve"};
    aff::serve::ModelEngineOptions engine;
    bool test_engine = false;
    int test_delay_ms = 0;
    int test_load_ms = 0;
    aff::serve::ServiceOptions service;
    aff::serve::HttpServerOptions http;
    std::string max_body = "16MiB";
    int timeout_s = 30;
    std::size_t ctx_size = 0;
    std::string prefix_cache_mib = "4096";
    app.add_option("-m,--model", engine.model_path, "checkpoint directory or .aff container to serve");
    app.add_option("--tokenizer", engine.tokenizer_path,
                   "tokenizer.json (default: the checkpoint directory's, or the container's own)");
    app.add_flag("--test-engine", test_engine,
                 "serve the scripted test engine instead of a model (for testing clients; not a language model)");
    app.add_option("--test-engine-delay-ms", test_delay_ms, "with --test-engine: sleep this long per generated token")
        ->check(aff::cli::number_between(0, 10000));
    app.add_option("--test-engine-load-ms", test_load_ms, "with --test-engine: take this long to \"load\" (tests /health)")
        ->check(aff::cli::number_between(0, 60000));
    app.add_option("--host", http.host, "address to listen on")->default_str("127.0.0.1");
    app.add_option("--port", http.port, "TCP port to listen on (0 = any free port)")->default_str("8080");
    app.add_option("--api-key", service.api_key, "require 'Authorization: Bearer KEY' or 'x-api-key: KEY' (except on /health)");
    app.add_option("--cors-origin", service.cors_origins,
                   "let browser pages from this origin call the API (repeatable; * = any; default: none)");
    app.add_option("--model-id", service.model_id, "model name reported by the API (default: the engine's)");
    app.add_option("--max-tokens-floor", service.max_tokens_floor,
                   "raise each chat request's max_tokens to at least N so reasoning is not cut off (0 = honour the caller)")
        ->default_str("256000");
    app.add_option("-c,--ctx-size", ctx_size, "context size in tokens (0 = the model's)")
        ->default_str("0")->check(aff::cli::whole_number_at_least(0));
    app.add_option("--temperature,--temp", service.default_temperature, "temperature when a request sends none")
        ->check(aff::cli::number_between(0, 2))->default_str("1.0");
    app.add_option("--top-p", service.default_top_p, "top_p when a request sends none")
        ->check(aff::cli::number_between(0, 1))->default_str("1.0");
    app.add_flag("--thinking", service.default_thinking, "think when a request does not say (default: do not)");
    app.add_option("--queue-size", service.max_waiting, "requests that may wait behind the running one; more get 503")
        ->default_str("64");
    app.add_option("--max-body", max_body, "largest request body accepted (413 above it)")->default_str("16MiB");
    app.add_option("--timeout-s", timeout_s, "seconds a client may take to send a request or to take output")
        ->check(aff::cli::number_between(1, 3600))->default_str("30");
    app.add_option("--prefix-cache-mib", prefix_cache_mib,
                   "memory for snapshots of prompt prefixes, reused when a request resends them (0 = off)")
        ->default_str("4096");
    app.add_option("--route-trace", engine.route_trace,
                   "record every request's expert selections to this file (formats/route-trace.md)");
    app.add_flag("--log-prompts", service.log_prompts, "also log each request body (prompts are not logged otherwise)");
    std::size_t& threads = aff::cli::add_threads(app);
    const aff::cli::Gpu& gpu = aff::cli::add_gpu(app);
    const aff::cli::Ui& ui = aff::cli::add_ui(app);
    const aff::DraftChoice& draft = aff::cli::add_draft(app);
    const aff::cli::Common& common = aff::cli::add_common(app, false);

    return aff::cli::run(app, argc, argv, [&] {
        if (test_engine == !engine.model_path.empty())
            aff::throw_usage("give exactly one of --model PATH or --test-engine");
        if (test_engine && !engine.route_trace.empty()) aff::throw_usage("--route-trace needs --model (the test engine routes nothing)");
        engine.threads = threads;
        engine.draft = draft;
        aff::check_draft_memory_flag(draft);
        aff::cli::set_backend(gpu, engine.backend);
        {
            std::uint64_t mib = 0;
            const char* end = prefix_cache_mib.data() + prefix_cache_mib.size();
            const auto [at, ec] = std::from_chars(prefix_cache_mib.data(), end, mib);
            if (prefix_cache_mib.empty() || ec != std::errc() || at != end || mib > (std::uint64_t(1) << 40))
                aff::throw_usage("--prefix-cache-mib: expected a whole number of MiB (0 turns the cache off), got \"" +
                                 prefix_cache_mib + "\"");
            engine.prefix_cache_bytes = std::size_t(mib) << 20;
        }
        service.ctx_size = ctx_size;
        http.limits.max_body_bytes = std::size_t(aff::parse_size(max_body));
        http.request_timeout_ms = timeout_s * 1000;
        http.write_timeout_ms = timeout_s * 1000;
        http.idle_timeout_ms = timeout_s * 2000;
        // The live view (--ui): the server's requests feed its board; drawn off the server's threads.
        aff::ui::StatsBoard board("aff-serve");
        board.set_title("loading");
        aff::ui::ServeFeed feed(board);
        aff::ui::LiveView view(board, aff::ui::live_view_options(ui, common.quiet));
        auto say = [&](const std::string& line) { view.log("aff-serve: " + line); };
        service.observer = &feed;
        if (!common.quiet) service.log = say;
        std::unique_ptr<aff::ui::RouteHeat> heat;  // watches the engine's routing; outlives it
        aff::serve::Service svc(service);
        aff::serve::HttpServer server(http, svc);
        if (!common.quiet) say("listening on http://" + http.host + ":" + std::to_string(server.port()));
        // SIGINT/SIGTERM: refuse the queue, let the running generation finish within the
        // grace period, then cut it short (a complete reply either way) and exit 0.
        std::atomic<bool> loaded{false}, signalled{false};
        std::promise<void> stopped;
        // With the dashboard, Ctrl-C closes the view at once (status 130), as documented.
        if (!view.dash()) aff::cli::on_stop_signal([&](int sig) {
            signalled = true;
            if (!common.quiet)
                say(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + ": shutting down (up to " +
                    std::to_string(kShutdownGraceS) + " s for the running request)");
            svc.begin_shutdown();
            server.drain(kShutdownGraceS * 1000);
            svc.cut_generations();
            server.drain(2000);
            server.stop();
            stopped.set_value();
        });
        std::exception_ptr load_error;
        std::thread loader([&] {
            try {
                if (test_engine) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(test_load_ms));
                    svc.set_engine(std::make_unique<aff::serve::TestEngine>(ctx_size ? ctx_size : 4096, test_delay_ms));
                    loaded = true;
                    board.set_title("scripted test engine");
                    if (!common.quiet) say("ready (scripted test engine, not a model)");
                } else {
                    const auto t0 = std::chrono::steady_clock::now();
                    auto model = aff::serve::ModelEngine::load(engine);
                    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    const std::size_t ctx = ctx_size ? std::min(ctx_size, model->context_size()) : model->context_size();
                    const std::string id = model->model_id(), where = model->backend_description();
                    const std::string cache = model->prefix_cache_description();
                    const std::string drafts = model->draft_description();
                    board.set_title(id + " | " + where);
                    const aff::ui::ExpertPlane plane = aff::ui::resident_expert_plane(model->model().config(), model->on_gpu());
                    board.publish_plane(plane);
                    feed.engine_ready(model->drafter() != nullptr, model->sequence());  // drafts on or off, the tiers as loaded
                    if (view.dash()) {  // the plane's heat from the router, passed on to --route-trace's recorder
                        heat = std::make_unique<aff::ui::RouteHeat>(board, plane, model->route_recorder());
                        if (!aff::ui::install_route_heat([&](aff::RouteObserver* o) { model->set_route_observer(o); }, *heat))
                            heat.reset();
                    }
                    svc.set_engine(std::move(model));
                    loaded = true;
                    char line[512];
                    std::snprintf(line, sizeof line, "ready: %s loaded in %.1f s (context %zu tokens; %s; %s; %s)", id.c_str(),
                                  s, ctx, where.c_str(), cache.c_str(), drafts.c_str());
                    if (!common.quiet) say(line);
                }
            } catch (...) {
                load_error = std::current_exception();
                server.stop();
            }
        });
        server.run();
        if (signalled) {
            stopped.get_future().wait();  // the handler still uses the server
            if (!loaded) {
                // Stopped while the weights load: nothing to wait for (loading takes minutes).
                std::fflush(stderr);
                std::_Exit(aff::cli::exit_ok);
            }
        }
        loader.join();
        if (load_error) std::rethrow_exception(load_error);
        return aff::cli::exit_ok;
    });
}
