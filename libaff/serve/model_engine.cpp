// The model-backed Engine (see model_engine.hpp).
#include "libaff/serve/model_engine.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/units.hpp"
#include "libaff/runtime/chat_tokens.hpp"
#include "libaff/runtime/model_tokenizer.hpp"
#include "libaff/serve/dsv4_chat.hpp"
#include "libaff/tokenizer/dsv4_strings.hpp"

#include <filesystem>
#include <limits>

namespace aff::serve {
namespace {

class TokenizerTextStream final : public TokenTextStream {
public:
    explicit TokenizerTextStream(const tokenizer::Tokenizer& tok) : decoder_(tok) {}
    std::string push(std::int32_t token) override { return decoder_.push(token); }
    std::string finish() override { return decoder_.finish(); }

private:
    tokenizer::StreamDecoder decoder_;
};

// A backend snapshot as the prefix cache holds it.
class SnapshotEntry final : public CachedState {
public:
    explicit SnapshotEntry(std::unique_ptr<BackendSnapshot> s) : snapshot(std::move(s)) {}
    std::size_t bytes() const override { return snapshot->bytes(); }
    std::unique_ptr<BackendSnapshot> snapshot;
};

// "DeepSeek-V4-Flash" for .../DeepSeek-V4-Flash/ or .../DeepSeek-V4-Flash.aff.
std::string id_from_path(const std::string& path) {
    std::filesystem::path p(path);
    if (p.filename().empty()) p = p.parent_path();
    std::string id = std::filesystem::is_directory(p) ? p.filename().string() : p.stem().string();
    return id.empty() ? std::string("model") : id;
}

}  // namespace

std::unique_ptr<ModelEngine> ModelEngine::load(const ModelEngineOptions& options) {
    std::optional<tokenizer::Tokenizer> tok = load_model_tokenizer(options.model_path, options.tokenizer_path);
    if (!tok)
        throw Error(ErrorKind::usage,
                    "no tokenizer for this model: give --tokenizer FILE, or put tokenizer.json in the checkpoint "
                    "directory",
                    options.model_path);
    auto pool = std::make_unique<ThreadPool>(options.threads);
    auto model = Model::load(options.model_path, *pool, options.forward);
    auto backend = ForwardBackend::open(*model, options.model_path, options.backend, options.forward);
    auto engine = std::make_unique<ModelEngine>(std::move(pool), std::move(model), std::move(backend), std::move(*tok),
                                                id_from_path(options.model_path));
    engine->set_prefix_cache(options.prefix_cache_bytes);
    engine->model_path_ = options.model_path;
    if (!options.route_trace.empty())
        engine->set_route_recorder(std::make_unique<trace::RouteRecorder>(
            options.route_trace, trace::trace_header_for(engine->model().config(), options.model_path)));
    return engine;
}

ModelEngine::ModelEngine(std::unique_ptr<ThreadPool> pool, std::unique_ptr<Model> model,
                         std::unique_ptr<ForwardBackend> backend, tokenizer::Tokenizer tok, std::string model_id)
    : pool_(std::move(pool)),
      model_(std::move(model)),
      backend_(std::move(backend)),
      tokenizer_(std::move(tok)),
      model_id_(std::move(model_id)) {
    if (!backend_) throw_internal("ModelEngine: no forward backend");
    const std::size_t V = vocab_size();
    // Added tokens may lie past the model's vocabulary (DeepSeek's tokenizer.json can hold a
    // few more ids than the embedding has rows: prompts that would use them are refused
    // per request), but the BPE vocabulary itself must fit, or this is another model's.
    std::vector<bool> added(tokenizer_.id_limit(), false);
    for (const auto& a : tokenizer_.added_tokens()) added[std::size_t(a.id)] = true;
    for (std::size_t id = tokenizer_.id_limit(); id-- > V;)
        if (tokenizer_.contains(tokenizer::TokenId(id)) && !added[id])
            throw_format("the tokenizer's vocabulary reaches id " + std::to_string(id) + " but the model's has " +
                         std::to_string(V) + " ids (a tokenizer of another model?)");
    end_tokens_.assign(V, false);
    has_text_.assign(V, false);
    for (std::size_t id = 0; id < V; ++id) has_text_[id] = tokenizer_.contains(tokenizer::TokenId(id));
    for (int id : model_->config().eos_token_ids)
        if (id >= 0 && std::size_t(id) < V) end_tokens_[std::size_t(id)] = true;
    if (auto eos = tokenizer_.token_to_id(chat::dsv4::eos)) end_tokens_[std::size_t(*eos)] = true;
    if (auto a = tokenizer_.token_to_id(chat::dsv4::assistant)) assistant_token_ = *a;
}

std::size_t ModelEngine::context_size() const {
    return std::size_t(std::max<std::int64_t>(0, model_->config().max_position_embeddings));
}

std::size_t ModelEngine::vocab_size() const { return std::size_t(model_->config().vocab_size); }

std::vector<std::int32_t> ModelEngine::render_chat(const ChatPrompt& prompt) const {
    const std::vector<std::int32_t> ids = encode_chat_pieces(tokenizer_, render_dsv4_pieces(prompt));
    check_in_vocabulary(ids);
    return ids;
}

std::string ModelEngine::render_chat_text(const ChatPrompt& prompt) const { return render_dsv4_prompt(prompt); }

std::vector<std::int32_t> ModelEngine::tokenize(std::string_view text, bool add_bos) const {
    std::vector<std::int32_t> out;
    if (add_bos) out.push_back(model_->config().bos_token_id);
    const auto ids = tokenizer_.encode(text, true);
    check_in_vocabulary(ids);
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
}

void ModelEngine::check_in_vocabulary(std::span<const tokenizer::TokenId> ids) const {
    for (tokenizer::TokenId id : ids)
        if (std::size_t(id) >= vocab_size())
            throw_usage("the prompt holds the added token \"" + tokenizer_.id_to_token(id).value_or("") + "\" (id " +
                        std::to_string(id) + "), which the model's vocabulary of " + std::to_string(vocab_size()) +
                        " ids does not have");
}

std::string ModelEngine::token_text(std::int32_t token) const {
    if (!tokenizer_.contains(token)) return {};
    return std::string(tokenizer_.token_bytes(token));
}

std::unique_ptr<TokenTextStream> ModelEngine::text_stream() const {
    return std::make_unique<TokenizerTextStream>(tokenizer_);
}

std::unique_ptr<ChatOutputParser> ModelEngine::chat_parser(const ChatPrompt& prompt) const {
    return make_dsv4_parser(prompt.thinking);
}

bool ModelEngine::is_end_token(std::int32_t token) const {
    return token >= 0 && std::size_t(token) < end_tokens_.size() && end_tokens_[std::size_t(token)];
}

void ModelEngine::set_prefix_cache(std::size_t bytes) {
    sequence_valid_ = false;
    const bool usable = backend_->can_snapshot();
    cache_ = PrefixCache(usable ? bytes : 0);
    cache_description_ = bytes == 0 ? "prefix cache off"
                         : usable   ? "prefix cache " + format_bytes(bytes)
                                    : "no prefix cache: this backend cannot snapshot its state";
    publish_stats();
}

void ModelEngine::set_route_recorder(std::unique_ptr<trace::RouteRecorder> recorder) {
    backend_->set_route_observer(recorder.get());
    recorder_ = std::move(recorder);
}

std::span<const float> ModelEngine::prefill(std::span<const std::int32_t> tokens) {
    if (recorder_) recorder_->begin(trace_sequence_, trace::Phase::prefill);
    cached_tokens_ = 0;
    sequence_valid_ = false;
    sequence_.assign(tokens.begin(), tokens.end());
    if (tokens.size() < 2) {
        backend_->reset();
        logits_ = backend_->forward(tokens, false);
    } else {
        // The prompt runs as two calls split at snapshot_point, with the cache or without:
        // the GPU's logits depend on how tokens are split into calls (prefill GEMMs from 5
        // tokens up), and this way a server without the cache computes a prompt as one with
        // it does on a miss.
        const std::size_t head = snapshot_point(tokens);
        const PrefixCache::Match hit = cache_.enabled() ? cache_.find(tokens, tokens.size() - 1) : PrefixCache::Match{};
        if (hit.state) {
            backend_->restore(*static_cast<const SnapshotEntry&>(*hit.state).snapshot);
            cached_tokens_ = hit.tokens;
        } else {
            backend_->reset();
        }
        std::size_t at = hit.tokens;
        if (head > at) {
            backend_->forward(tokens.subspan(at, head - at), false);
            if (cache_.enabled()) keep_snapshot(tokens.first(head));
            at = head;
        }
        logits_ = backend_->forward(tokens.subspan(at), false);
        if (cache_.enabled()) publish_stats();
    }
    sequence_valid_ = true;
    return finish_logits();
}

std::span<const float> ModelEngine::decode(std::int32_t token) {
    if (recorder_) recorder_->begin(trace_sequence_, trace::Phase::decode);
    sequence_valid_ = false;
    logits_ = backend_->forward(std::span<const std::int32_t>(&token, 1), false);
    sequence_.push_back(token);
    sequence_valid_ = true;
    return finish_logits();
}

std::size_t ModelEngine::snapshot_point(std::span<const std::int32_t> tokens) const {
    // Rendered chats end in <｜Assistant｜> and then <think> or </think> (plain text to this
    // tokenizer). The next turn's prompt keeps everything up to that <｜Assistant｜> but, in
    // thinking mode, writes </think> and the answer where this prompt opened <think>: the
    // state just after the last <｜Assistant｜> is the one the next turn can use. Only the
    // template's tail counts (the marker and a think tag of 3 tokens, with room to spare): a
    // marker deep inside a raw completion prompt would put the snapshot far from its end.
    constexpr std::size_t kTail = 8;
    const std::size_t n = tokens.size();
    for (std::size_t i = n - 1; i-- > 0 && n - i <= kTail;)
        if (tokens[i] == assistant_token_) return i + 1;
    return n - 1;
}

void ModelEngine::end_sequence() {
    if (recorder_) {
        recorder_->publish();
        ++trace_sequence_;
    }
    if (!cache_.enabled() || !sequence_valid_ || sequence_.empty()) return;
    keep_snapshot(sequence_);
    publish_stats();
}

void ModelEngine::keep_snapshot(std::span<const std::int32_t> tokens) {
    if (cache_.contains(tokens)) return;
    cache_.insert({tokens.begin(), tokens.end()}, std::make_shared<SnapshotEntry>(backend_->snapshot()));
}

void ModelEngine::publish_stats() {
    std::lock_guard lock(stats_mutex_);
    if (cache_.enabled()) stats_ = cache_.stats();
    else stats_.reset();
}

std::optional<PrefixCacheStats> ModelEngine::prefix_cache_stats() const {
    std::lock_guard lock(stats_mutex_);
    return stats_;
}

std::span<const float> ModelEngine::finish_logits() {
    for (std::size_t id = 0; id < logits_.size(); ++id)
        if (!has_text_[id]) logits_[id] = -std::numeric_limits<float>::infinity();
    return logits_;
}

}  // namespace aff::serve
