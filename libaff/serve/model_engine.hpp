// The Engine over a real DeepSeek-V4 model: the forward pass ForwardBackend picks (the GPU
// model when one is visible and --gpus does not say 0, else the CPU reference) with one
// sequence in flight, and the model's own tokenizer. Chats are rendered by the V4 encoding
// the scripted test engine also uses (dsv4_chat.hpp) and encoded with the template's markup
// as special tokens and the request's words as plain text, so a user cannot forge a turn
// marker. With a prefix cache (prefix_cache.hpp) it snapshots the backend's state one
// token before the end of each prompt and at the end of each generation, and starts a
// prompt from the longest snapshot that prefixes it.
#pragma once

#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/backend.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/serve/engine.hpp"
#include "libaff/trace/recorder.hpp"
#include "libaff/tokenizer/tokenizer.hpp"

#include <memory>
#include <mutex>
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
};

class ModelEngine final : public Engine {
public:
    // Loads the tokenizer first (cheap, and its absence is the likelier mistake), then
    // every weight, then the forward backend. Throws aff::Error naming the file at fault.
    static std::unique_ptr<ModelEngine> load(const ModelEngineOptions& options);

    // `backend` runs `model` (ForwardBackend::open over it).
    ModelEngine(std::unique_ptr<ThreadPool> pool, std::unique_ptr<Model> model,
                std::unique_ptr<ForwardBackend> backend, tokenizer::Tokenizer tokenizer, std::string model_id);

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
    // Logits of ids the tokenizer does not know (the vocabulary is padded past the
    // tokenizer's last id) are -infinity: they have no text, so they are never sampled.
    // Runs a prompt of 2+ tokens as two calls split at snapshot_point(), cache or not. With
    // the cache: restores the longest cached prefix of `tokens` (leaving at least the last
    // token to run, for its logits), prefills up to snapshot_point(), snapshots there, then
    // runs the rest. On the CPU the logits are those of one whole prefill, bit for bit (its
    // forward does not depend on chunking; backend_snapshot_test checks it). On the GPU they
    // are those of the same calls on a fresh state (tests/gpu/snapshot_test.cpp): a miss
    // computes what a server without the cache does, and a restored end of a generation
    // holds its reply's tokens as decode steps ran them, where a server without the cache
    // prefills them (the GEMMs' bf16 inputs against the GEMVs' fp32: logits may differ in
    // their last bits, rarely the chosen token).
    std::span<const float> prefill(std::span<const std::int32_t> tokens) override;
    std::span<const float> decode(std::int32_t token) override;
    // Snapshots the sequence as it ends (prompt and generated tokens), unless cached.
    void end_sequence() override;
    std::size_t cached_tokens() const override { return cached_tokens_; }
    std::optional<PrefixCacheStats> prefix_cache_stats() const override;

    // Sets the prefix cache's budget (0: off) and drops what it held. Without a call there
    // is no cache (load() makes the call with ModelEngineOptions::prefix_cache_bytes).
    void set_prefix_cache(std::size_t bytes);
    // Records every later forward's routing (not owned by the backend: kept here).
    void set_route_recorder(std::unique_ptr<trace::RouteRecorder> recorder);
    // Another watcher of the routing (aff-serve's live view): `observer` takes the recorder's
    // place on the backend and must pass every event on to route_recorder() (null: none).
    // Throws unsupported where the backend has no route hook (the GPU forward).
    void set_route_observer(RouteObserver* observer) { backend_->set_route_observer(observer); }
    RouteObserver* route_recorder() const { return recorder_.get(); }
    // For the start-up line: "prefix cache 4.00 GiB", "prefix cache off", or why there is none.
    const std::string& prefix_cache_description() const { return cache_description_; }

    const Model& model() const { return *model_; }
    // Where the forward runs (ForwardBackend::describe), for the server's start-up line.
    std::string backend_description() const { return backend_->describe(); }
    bool on_gpu() const { return backend_->on_gpu(); }
    const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

private:
    std::span<const float> finish_logits();
    // Snapshots the backend under `tokens` (the tokens it has run) unless already cached.
    void keep_snapshot(std::span<const std::int32_t> tokens);
    // Where a prompt of 2+ tokens is snapshotted: just after a <｜Assistant｜> among its last
    // 8 tokens (the template's opening of the reply), else before its last token.
    std::size_t snapshot_point(std::span<const std::int32_t> tokens) const;
    void publish_stats();
    // Throws aff::Error (usage) for an id past the model's vocabulary (an added token of
    // the tokenizer that the embedding has no row for).
    void check_in_vocabulary(std::span<const tokenizer::TokenId> ids) const;

    std::unique_ptr<ThreadPool> pool_;  // outlives model_, which runs on it
    std::unique_ptr<Model> model_;
    std::unique_ptr<trace::RouteRecorder> recorder_;  // observes backend_; destroyed after it
    std::uint32_t trace_sequence_ = 0;
    std::unique_ptr<ForwardBackend> backend_;  // runs model_; destroyed before it
    tokenizer::Tokenizer tokenizer_;
    std::string model_id_;
    std::string model_path_;  // as loaded (load()); empty when constructed directly
    std::vector<bool> end_tokens_;   // by id: the config's EOS ids and the tokenizer's end of sentence
    std::vector<bool> has_text_;     // by id: the tokenizer knows it
    std::int32_t assistant_token_ = -1;  // <｜Assistant｜>, where the tokenizer has it
    std::vector<float> logits_;
    PrefixCache cache_{0};
    std::string cache_description_ = "prefix cache off";
    std::vector<std::int32_t> sequence_;  // the tokens the backend has run, while it is consistent
    bool sequence_valid_ = false;          // false while a forward is under way or after it threw
    std::size_t cached_tokens_ = 0;
    mutable std::mutex stats_mutex_;       // guards stats_, read by the /metrics thread
    std::optional<PrefixCacheStats> stats_;
};

}  // namespace aff::serve
