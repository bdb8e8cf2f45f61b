// The Engine over a real DeepSeek-V4 model: the forward pass open_sequence picks (the GPU
// model when one is visible and --gpus does not say 0, else the CPU reference) with one
// sequence in flight, and the model's own tokenizer. Chats are rendered by the V4 encoding
// the scripted test engine also uses (dsv4_chat.hpp) and encoded with the template's markup
// as special tokens and the request's words as plain text, so a user cannot forge a turn
// marker. Its sequence is a PrefixCachedSequence (cached_sequence.hpp): with a prefix cache
// it snapshots the backend's state near the end of each prompt and at the end of each
// generation, and starts a prompt from the longest snapshot that prefixes it.
#pragma once

#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/draft_choice.hpp"
#include "libaff/runtime/draft_memory.hpp"
#include "libaff/runtime/open_sequence.hpp"
#include "libaff/runtime/route_phase.hpp"
#include "libaff/serve/cached_sequence.hpp"
#include "libaff/serve/engine.hpp"
#include "libaff/trace/recorder.hpp"
#include "libaff/tokenizer/tokenizer.hpp"

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aff::serve {

struct ModelEngineOptions {
    std::string model_path;      // checkpoint directory or .aff container (Model::load)
    std::string tokenizer_path;  // empty: the model's own (runtime/model_tokenizer.hpp)
    std::size_t threads = 0;     // 0 = one per hardware thread
    ForwardOptions forward;
    BackendOptions backend;      // --gpus, --gpu-mib
    // --prefix-cache-mib: host memory for prefix snapshots (of the CPU state, or of the part
    // of the GPU state a position uses); 0 disables the cache. A backend that cannot
    // snapshot would run without it whatever this says (both can).
    std::size_t prefix_cache_bytes = std::size_t(4096) << 20;
    // --route-trace: record the routing of every request (CPU path) into this file, each
    // request a sequence; the file is rewritten whole after every request (RouteTraceWriter).
    std::string route_trace;
    // --draft, --draft-max, --draft-model: speculative decoding with the model's DSpark stages or
    // MTP layer (CPU path); the draft container loads beside the main one (draft_choice.hpp).
    DraftChoice draft;
};

class ModelEngine final : public Engine {
public:
    // Loads the tokenizer first (cheap, and its absence is the likelier mistake), then
    // every weight, then the forward backend. Throws aff::Error naming the file at fault.
    static std::unique_ptr<ModelEngine> load(const ModelEngineOptions& options);

    // `backend` runs `model` (open_sequence over it).
    ModelEngine(std::unique_ptr<ThreadPool> pool, std::unique_ptr<Model> model, std::unique_ptr<Sequence> backend,
                tokenizer::Tokenizer tokenizer, std::string model_id);
    // Writes --draft auto's memory (draft_memory.hpp) where load() found it.
    ~ModelEngine() override;
    // The memory is written after the first generation that measured anything, then at most
    // every kMemoryInterval of generations (a server killed outright loses only that much),
    // and when the engine goes; `now` writes it whatever the time. A failure is said once.
    static constexpr std::chrono::seconds kMemoryInterval{60};
    void keep_draft_memory_if_due(bool now);

    std::string model_id() const override { return model_id_; }
    // The model's max_position_embeddings; aff-serve --ctx-size lowers it.
    std::size_t context_size() const override;
    std::size_t vocab_size() const override;
    std::vector<std::int32_t> render_chat(const ChatPrompt& prompt) const override;
    std::string render_chat_text(const ChatPrompt& prompt) const override;
    std::string model_path() const override { return model_path_; }
    // A completion prompt is the model's raw input: special-token strings in it are
    // special tokens (that is how a client writes its own template).
    std::vector<std::int32_t> tokenize(std::string_view text, bool add_bos) const override;
    std::string token_text(std::int32_t token) const override;
    std::unique_ptr<TokenTextStream> text_stream() const override;
    std::unique_ptr<ChatOutputParser> chat_parser(const ChatPrompt& prompt) const override;
    bool is_end_token(std::int32_t token) const override;
    // The PrefixCachedSequence over the backend (cached_sequence.hpp says how prompts meet
    // the cache): logits of ids the tokenizer does not know are -infinity.
    Sequence& sequence() override { return *sequence_; }
    // Snapshots the sequence as it ends (prompt and generated tokens), unless cached.
    // After each generation: the prefix cache's bookkeeping, and the draft gate's memory
    // written when due (keep_draft_memory_if_due).
    void end_sequence() override;
    void before_dispatch(const Dispatch& d) override { sequence_->label_next_call(route_phase(d.kind)); }
    std::size_t cached_tokens() const override { return sequence_->cached_tokens(); }
    std::optional<PrefixCacheStats> prefix_cache_stats() const override { return sequence_->prefix_cache_stats(); }
    std::optional<TierStats> tier_stats() const override { return sequence_->published_tier_stats(); }

    // Sets the prefix cache's budget (0: off) and drops what it held. Without a call there
    // is no cache (load() makes the call with ModelEngineOptions::prefix_cache_bytes).
    void set_prefix_cache(std::size_t bytes) { sequence_->set_prefix_cache(bytes); }
    // Records every later forward's routing (PrefixCachedSequence::set_route_recorder).
    void set_route_recorder(std::unique_ptr<trace::RouteRecorder> recorder);
    // Another watcher of the routing (aff-serve's live view): `observer` takes the recorder's
    // place on the backend and must pass every event on to route_recorder() (null: none).
    // Both backends have the hook (the GPU forward's from its route ring).
    void set_route_observer(RouteObserver* observer) { sequence_->set_route_observer(observer); }
    RouteObserver* route_recorder() const { return recorder_.get(); }
    // For the start-up line: "prefix cache 4.00 GiB", "prefix cache off", or why there is none.
    const std::string& prefix_cache_description() const { return sequence_->prefix_cache_description(); }

    const Model& model() const { return *model_; }
    // Where the forward runs (Sequence::describe), for the server's start-up line.
    std::string backend_description() const { return sequence_->describe(); }
    bool on_gpu() const { return sequence_->on_gpu(); }
    // The drafter generations use (null: none) and, for the start-up line, what it is.
    Drafter* drafter() override { return drafter_.get(); }
    const std::string& draft_description() const { return draft_description_; }
    const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

private:
    // Throws aff::Error (usage) for an id past the model's vocabulary (an added token of
    // the tokenizer that the embedding has no row for).
    void check_in_vocabulary(std::span<const tokenizer::TokenId> ids) const;

    std::unique_ptr<ThreadPool> pool_;  // outlives model_, which runs on it
    std::unique_ptr<Model> model_;
    std::unique_ptr<trace::RouteRecorder> recorder_;  // observes sequence_; destroyed after it
    tokenizer::Tokenizer tokenizer_;
    std::string model_id_;
    std::string model_path_;  // as loaded (load()); empty when constructed directly
    std::vector<bool> end_tokens_;   // by id: the config's EOS ids and the tokenizer's end of sentence
    std::unique_ptr<PrefixCachedSequence> sequence_;  // runs model_; destroyed before it
    std::unique_ptr<Drafter> drafter_;                // watches sequence_'s backend; destroyed before it
    std::string draft_description_ = "drafts off";
    DraftMemorySite memory_;  // where the draft gate's memory lives (path "": none)
    bool memory_written_ = false, memory_warned_ = false;
    std::chrono::steady_clock::time_point memory_time_{};
};

}  // namespace aff::serve
