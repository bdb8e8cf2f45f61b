// aff-run: one generation from a DeepSeek-V4 checkpoint directory or .aff container, on
// the GPU when one is visible (libaff/runtime/open_sequence.hpp picks) and on the CPU reference path
// otherwise, printing text (or token ids) as it is generated and a closing line with
// prefill and decode speed; plus diagnostics: token and logits dumps, forced
// continuations, truncated stacks; and a chat mode (--chat: the model's chat encoding, one
// user turn per line of standard input). The loops are libaff/runtime (generate.cpp,
// chat_session.cpp); this file maps flags, checks them all before loading anything, and prints.
#include "libaff/core/atomic_file.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/chat_session.hpp"
#include "libaff/model/draft_load.hpp"
#include "libaff/runtime/draft_choice.hpp"
#include "libaff/runtime/draft_memory.hpp"
#include "libaff/runtime/end_tokens.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/logits_file.hpp"
#include "libaff/runtime/model_tokenizer.hpp"
#include "libaff/runtime/open_sequence.hpp"
#include "libaff/runtime/prompt_limits.hpp"
#include "libaff/runtime/route_phase.hpp"
#include "libaff/runtime/sampler.hpp"
#include "libaff/runtime/token_list.hpp"
#include "libaff/trace/recorder.hpp"
#include "libaff/tokenizer/tokenizer.hpp"
#include "libaff/ui/cli.hpp"
#include "libaff/ui/live_view.hpp"
#include "libaff/ui/plane_source.hpp"
#include "libaff/ui/route_heat.hpp"
#include "libaff/ui/stats.hpp"
#include "libaff/ui/tier_feed.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>

namespace {

// The ids the tokenizer has text for (a --tokens prompt may hold others).
std::vector<std::int32_t> known_ids(const aff::tokenizer::Tokenizer& tok, std::span<const std::int32_t> ids) {
    std::vector<std::int32_t> known;
    for (std::int32_t t : ids)
        if (tok.contains(aff::tokenizer::TokenId(t))) known.push_back(t);
    return known;
}

void print_top_logits(std::int64_t position, std::int32_t token, std::span<const float> logits, std::size_t k) {
    std::fprintf(stderr, "logits pos %lld token %d:", static_cast<long long>(position), token);
    for (const aff::TokenLogprob& t : aff::top_logprobs(logits, k))
        std::fprintf(stderr, " %d:%.4f(%.4f)", t.token, logits[static_cast<std::size_t>(t.token)], t.logprob);
    std::fprintf(stderr, "\n");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One chat turn: the reply on stdout as it comes, a line of figures on stderr. A turn that
// does not fit the context is refused with one line and the conversation goes on.
void chat_turn(aff::ChatSession& session, const std::string& text, bool quiet) {
    aff::ChatTurnStats st;
    try {
        st = session.say(text, [](const std::string& piece) {
            std::cout << piece;
            std::cout.flush();
        });
    } catch (const aff::Error& e) {
        if (e.kind() != aff::ErrorKind::usage) throw;
        std::fprintf(stderr, "aff-run: %s\n", e.what());
        return;
    }
    std::cout << '\n';
    std::cout.flush();
    if (!quiet)
        std::fprintf(stderr, "aff-run: %zu prompt tokens (%zu already run), first token after %.0f ms, %zu tokens%s\n",
                     st.prompt_tokens, st.reused_tokens, st.first_token_seconds * 1000, st.generation.generated_tokens,
                     st.generation.ended_by_end_token ? "" : ", cut at -n");
}

// --chat: `first` (from -p/-f) if any, then one user turn per line of standard input
// until its end; a "> " prompt on stderr when it is a terminal.
int chat_loop(aff::ChatSession& session, const std::string& first, bool quiet) {
    if (!first.empty()) chat_turn(session, first, quiet);
    const bool terminal = ::isatty(STDIN_FILENO) != 0;
    std::string line;
    while (true) {
        if (terminal) std::fprintf(stderr, "> ");
        if (!std::getline(std::cin, line)) break;
        if (!line.empty()) chat_turn(session, line, quiet);
    }
    if (terminal) std::fprintf(stderr, "\n");
    return aff::cli::exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Generate from a DeepSeek-V4 checkpoint or .aff container (on a GPU when one is visible).", "aff-run"};
    std::string model_path, tokenizer_path, prompt, prompt_file, tokens_text, forced_text, logits_out, system, route_trace;
    aff::GenerateOptions gen;
    aff::ForwardOptions fwd;
    bool no_echo = false, dump_tokens = false, chat = false, ignore_eos = false;
    int n_predict = 32;
    std::size_t dump_logits = 0, ctx_size = 0;
    app.add_option("-m,--model", model_path, "checkpoint directory (config.json + safetensors) or .aff container")
        ->required();
    app.add_option("--tokenizer", tokenizer_path, "tokenizer.json (default: the model directory's, or the container's own)");
    auto* p_opt = app.add_option("-p,--prompt", prompt, "prompt text (with --chat: the first user turn)");
    auto* f_opt = app.add_option("-f,--prompt-file", prompt_file, "read the prompt text from a file");
    auto* t_opt = app.add_option("--tokens", tokens_text, "prompt as token ids, e.g. 0,17,42");
    p_opt->excludes(f_opt)->excludes(t_opt);
    f_opt->excludes(t_opt);
    auto* chat_opt = app.add_flag("--chat", chat,
                                  "chat in the model's chat encoding: one user turn per line of standard input (also -cnv)");
    app.add_option("--system", system, "with --chat: the system message")->needs(chat_opt);
    app.add_option("-n,--n-predict", n_predict, "tokens to generate (with --chat: per reply)")
        ->default_val(32)->check(aff::cli::whole_number_at_least(0));
    app.add_option("-c,--ctx-size", ctx_size, "context size in tokens: prompt and reply must fit (0 = the model's)")
        ->default_str("0")->check(aff::cli::whole_number_at_least(0));
    app.add_flag("--ignore-eos", ignore_eos, "keep generating after an end-of-sequence token");
    app.add_flag("--no-echo", no_echo, "do not print the prompt before the generated text");
    app.add_option("--temperature,--temp", gen.sampling.temperature, "sampling temperature (0 = greedy)")
        ->default_val(1.0)->check(aff::cli::number_at_least(0));
    app.add_option("--top-k", gen.sampling.top_k, "keep the k most likely tokens (0 = off)")
        ->default_val(0)->check(aff::cli::whole_number_at_least(0));
    app.add_option("--top-p", gen.sampling.top_p, "nucleus sampling mass (1 = off)")
        ->default_val(1.0)->check(aff::cli::number_between(0, 1));
    app.add_option("--min-p", gen.sampling.min_p, "drop tokens below min-p times the top probability")
        ->default_val(0.0)->check(aff::cli::number_between(0, 1));
    app.add_option("-s,--seed", gen.sampling.seed, "random seed")->default_val(0)->check(aff::cli::whole_number_at_least(0));
    auto* dump_tokens_opt = app.add_flag("--dump-tokens", dump_tokens, "print the prompt and generated token ids on stderr");
    auto* dump_logits_opt = app.add_option("--dump-logits", dump_logits, "print the K largest logits of every position on stderr");
    auto* logits_out_opt = app.add_option("--logits-out", logits_out, "write every position's float32 logits (formats/logits.md)");
    auto* route_trace_opt = app.add_option("--route-trace", route_trace,
                                           "record every layer's expert selections (formats/route-trace.md)");
    auto* forced_opt = app.add_option("--force-tokens", forced_text, "generate exactly these token ids instead of sampling");
    app.add_option("--max-layers", fwd.max_layers, "run only the first N layers (diagnostics)")
        ->check(aff::cli::whole_number_at_least(1));
    app.add_flag("--no-routed-experts", fwd.no_routed_experts, "skip routed experts (diagnostics)");
    for (CLI::Option* o : {t_opt, dump_tokens_opt, dump_logits_opt, logits_out_opt, route_trace_opt, forced_opt}) chat_opt->excludes(o);
    std::size_t& threads = aff::cli::add_threads(app);
    const aff::cli::Gpu& gpu = aff::cli::add_gpu(app);
    const aff::cli::Ui& ui = aff::cli::add_ui(app);
    const aff::DraftChoice& draft = aff::cli::add_draft(app);
    const aff::cli::Common& common = aff::cli::add_common(app, false);

    return aff::cli::run(app, argc, argv, [&] {
        // Every flag is checked before the model loads (minutes for a real one).
        if (!chat && prompt.empty() && prompt_file.empty() && tokens_text.empty())
            aff::throw_usage("give a prompt: -p TEXT, -f FILE or --tokens IDS (or --chat)");
        { const aff::Sampler check(gen.sampling); }
        if (!route_trace.empty() && fwd.no_routed_experts && aff::gpu_support_built() && gpu.gpus != 0)
            aff::throw_usage("--route-trace with --no-routed-experts records on the CPU path only (no router runs on "
                             "the GPU): add --gpus 0");
        if (!prompt_file.empty()) aff::check_prompt_file(prompt_file);
        if (!logits_out.empty()) aff::check_output_path(logits_out);
        aff::check_draft_memory_flag(draft);
        if (!tokens_text.empty()) gen.prompt = aff::parse_token_list(tokens_text);
        if (!forced_text.empty()) gen.forced = aff::parse_token_list(forced_text);
        const std::optional<aff::tokenizer::Tokenizer> tok = aff::load_model_tokenizer(model_path, tokenizer_path);
        if (!tok && (chat || tokens_text.empty()))
            aff::throw_usage(std::string(chat ? "--chat" : "a text prompt") +
                             " needs a tokenizer (--tokenizer, tokenizer.json in the model directory or a container with "
                             "one)" + (chat ? "" : "; or give --tokens"));

        const auto load_start = std::chrono::steady_clock::now();
        aff::ThreadPool pool(threads);
        auto model = aff::load_model_with_draft(model_path, aff::draft_model_to_load(draft, model_path), pool, fwd);
        const aff::ModelConfig& config = model->config();
        const std::size_t context = ctx_size ? ctx_size : std::size_t(std::max<std::int64_t>(0, config.max_position_embeddings));
        if (tokens_text.empty()) {
            // Bounded by bytes first: a text too long for the context is never tokenised.
            const std::uint64_t max_bytes = aff::max_prompt_bytes(*tok, context);
            if (!prompt_file.empty()) prompt = aff::read_prompt_file(prompt_file, max_bytes);
            aff::check_prompt_bytes(prompt.size(), max_bytes, context);
        }
        if (!chat && tokens_text.empty()) {
            gen.prompt.push_back(config.bos_token_id);  // as the chat encoding starts every conversation
            for (auto id : tok->encode(prompt)) gen.prompt.push_back(static_cast<std::int32_t>(id));
        }
        gen.max_new_tokens = std::size_t(n_predict);
        if (!ignore_eos) gen.is_end_token = aff::config_end_tokens(config);
        aff::check_tokens_in_vocabulary(std::size_t(config.vocab_size), gen.prompt, "prompt");
        aff::check_tokens_in_vocabulary(std::size_t(config.vocab_size), gen.forced, "forced");
        const std::size_t reply_tokens = gen.forced.empty() ? std::size_t(gen.max_new_tokens) : gen.forced.size();
        if (!chat && gen.prompt.size() + reply_tokens > context)
            aff::throw_usage("the prompt (" + std::to_string(gen.prompt.size()) + " tokens) and " + std::to_string(reply_tokens) +
                             " generated tokens do not fit the context of " + std::to_string(context) + " tokens (-c)");

        aff::BackendOptions backend_options;
        aff::cli::set_backend(gpu, backend_options);
        auto backend = aff::open_sequence(*model, model_path, backend_options, fwd);
        // Chat turns and forced continuations run without drafts.
        const bool may_draft = !chat && gen.forced.empty();
        aff::OpenedDrafter drafter;
        if (may_draft) drafter = aff::open_drafter(draft, *model, *backend);
        // --draft auto starts from what the last run on this model, drafts and backend measured.
        const aff::DraftMemorySite memory_site = aff::draft_memory_site(draft, model_path, *backend, threads, drafter);
        const aff::DraftMemoryNotes memory = aff::recall_draft_memory(drafter.drafter.get(), memory_site.path, memory_site.key);
        if (!memory.warning.empty()) std::fprintf(stderr, "aff-run: %s\n", memory.warning.c_str());
        const double load_seconds = seconds_since(load_start);

        if (chat) {
            if (!common.quiet) {
                std::fprintf(stderr, "aff-run: %s\n", backend->describe().c_str());
                std::fprintf(stderr, "aff-run: loaded in %.1f s\n", load_seconds);
            }
            aff::ChatSessionOptions options;
            options.system = system;
            options.max_new_tokens = n_predict;
            options.ignore_eos = ignore_eos;
            options.sampling = gen.sampling;
            options.context_size = context;
            aff::ChatSession session(config, *tok, *backend, options);
            return chat_loop(session, prompt, common.quiet);
        }

        // The live view (--ui): figures published from the callbacks below, drawn off this thread.
        aff::ui::StatsBoard board("aff-run");
        std::filesystem::path name(model_path);
        if (name.filename().empty()) name = name.parent_path();  // "dir/"
        board.set_title(name.filename().string() + " | " + backend->describe());
        board.publish_plane(aff::ui::resident_expert_plane(config, backend->on_gpu()));
        aff::ui::TierFeed tiers(board);  // the Tiers panel and the plane's tiers, between forward calls
        tiers.publish(backend->expert_tiers(), backend->on_gpu());
        aff::ui::LiveView view(board, aff::ui::live_view_options(ui, common.quiet));
        if (!common.quiet) {
            view.log("aff-run: " + backend->describe());
            char loaded[64];
            std::snprintf(loaded, sizeof loaded, "aff-run: loaded in %.1f s", load_seconds);
            view.log(loaded);
            if (may_draft) view.log("aff-run: " + drafter.description);
            if (!memory.recalled.empty()) view.log("aff-run: " + memory.recalled);
        }

        std::unique_ptr<aff::tokenizer::StreamDecoder> stream;
        if (tok) stream = std::make_unique<aff::tokenizer::StreamDecoder>(*tok);
        if (!no_echo) {
            if (tok && tokens_text.empty()) view.output(prompt);
            else if (tok) view.output(tok->decode(known_ids(*tok, gen.prompt)));
            else for (auto t : gen.prompt) view.output(std::to_string(t) + ' ');
        }
        std::vector<std::int32_t> generated;
        std::unique_ptr<aff::LogitsFileWriter> logits_file;
        if (!logits_out.empty())
            logits_file = std::make_unique<aff::LogitsFileWriter>(logits_out, static_cast<std::uint32_t>(config.vocab_size));

        const auto gen_start = std::chrono::steady_clock::now();
        double first_token_seconds = 0;
        aff::GenerateHooks cb;
        const std::uint64_t request = board.add_request(gen.prompt.size());
        cb.on_step = [&](const aff::GenerationStep& step) {
            const std::int32_t t = step.token;
            board.add_token(request);
            if (generated.empty()) first_token_seconds = seconds_since(gen_start);
            generated.push_back(t);
            // An id without text (DeepSeek's embedding has some past the tokenizer) prints nothing.
            if (!stream) view.output(std::to_string(t) + ' ');
            else if (tok->contains(aff::tokenizer::TokenId(t))) view.output(stream->push(t));
            return true;
        };
        if (logits_file || dump_logits > 0)
            cb.on_logits = [&](std::int64_t pos, std::int32_t t, std::span<const float> logits) {
                if (logits_file) logits_file->add(pos, t, logits);
                if (dump_logits > 0) print_top_logits(pos, t, logits, dump_logits);
            };
        std::unique_ptr<aff::trace::RouteRecorder> recorder;
        if (!route_trace.empty()) {
            recorder = std::make_unique<aff::trace::RouteRecorder>(route_trace, aff::trace::trace_header_for(model->config(), model_path));
            backend->set_route_observer(recorder.get());
        }
        // The dashboard's plane heat watches the router too, passing events on to the recorder.
        std::unique_ptr<aff::ui::RouteHeat> heat;
        if (view.dash()) {
            heat = std::make_unique<aff::ui::RouteHeat>(board, aff::ui::resident_expert_plane(config, backend->on_gpu()),
                                                        recorder.get());
            if (!aff::ui::install_route_heat([&](aff::RouteObserver* o) { backend->set_route_observer(o); }, *heat))
                heat.reset();
        }
        // The loop says what each call runs: the prompt, a generated token, a verify call or a
        // rewind's replay.
        if (recorder)
            cb.before_dispatch = [&](const aff::Dispatch& d) { recorder->begin(0, aff::route_phase(d.kind)); };
        cb.between_dispatches = [&](const aff::Dispatch&) { tiers.between_calls(*backend); };
        cb.drafter = drafter.drafter.get();
        board.publish_drafts({cb.drafter != nullptr});  // off, or no verify call yet
        // The dashboard's Drafts panel, as the verify calls go.
        cb.on_verified = [&](const aff::GenerateStats& s) {
            if (s.drafted_tokens > 0)
                board.publish_drafts({true, s.verify_calls, double(s.accepted_tokens) / double(s.drafted_tokens),
                                      aff::mean_accepted(s)});
        };
        board.start_request(request);
        const aff::GenerateStats st = aff::generate(*backend, gen, cb);
        board.finish_request(request);
        tiers.publish(backend->expert_tiers(), backend->on_gpu());  // the run's totals
        tiers.idle();
        if (heat) heat->publish();
        view.output((stream ? stream->finish() : std::string()) + '\n');
        view.stop();
        if (logits_file) logits_file->commit();
        if (recorder) recorder->publish();
        if (dump_tokens) {
            std::fprintf(stderr, "prompt tokens:");
            for (auto t : gen.prompt) std::fprintf(stderr, " %d", t);
            std::fprintf(stderr, "\ngenerated tokens:");
            for (auto t : generated) std::fprintf(stderr, " %d", t);
            std::fprintf(stderr, "\n");
        }
        const double prefill_rate = st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0;
        // Tokens run over the whole decode time, drafts or not: a forward call yields several
        // tokens with drafts, the drafts cost time of their own, and sampling and output cost
        // the same either way, so only wall time compares the two (forward time alone made
        // runs without drafts look faster than they are, most at temperature > 0).
        const double decode_rate = st.decode_seconds > 0 ? (st.decode_forwards + st.accepted_tokens) / st.decode_seconds : 0;
        std::fflush(stdout);
        std::fprintf(stderr, "aff-run: prefill %zu tokens %.1f tok/s, decode %zu tokens %.1f tok/s, first token after %.0f ms%s\n",
                     st.prompt_tokens, prefill_rate, st.generated_tokens, decode_rate, first_token_seconds * 1000,
                     st.ended_by_end_token ? ", ended by EOS" : "");
        if (cb.drafter) std::fprintf(stderr, "aff-run: %s\n", aff::acceptance_summary(st).c_str());
        if (const auto w = aff::keep_draft_memory(cb.drafter, memory_site.path, memory_site.key); w && !w->empty())
            std::fprintf(stderr, "aff-run: %s\n", w->c_str());
        if (const std::string tiers = backend->placement_summary(); !tiers.empty())
            std::fprintf(stderr, "aff-run: %s\n", tiers.c_str());
        return aff::cli::exit_ok;
    }, {{"-cnv", "--chat"}});
}
