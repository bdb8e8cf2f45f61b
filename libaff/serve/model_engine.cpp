// The model-backed Engine (see model_engine.hpp).
#include "libaff/serve/model_engine.hpp"

#include "libaff/model/draft_load.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/chat_tokens.hpp"
#include "libaff/runtime/draft_memory.hpp"
#include "libaff/runtime/model_tokenizer.hpp"
#include "libaff/serve/dsv4_chat.hpp"
#include "libaff/tokenizer/dsv4_strings.hpp"

#include <cstdio>
#include <filesystem>

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
    auto model = load_model_with_draft(options.model_path, draft_model_to_load(options.draft, options.model_path), *pool,
                                      options.forward);
    auto backend = open_sequence(*model, options.model_path, options.backend, options.forward);
    // The drafter watches the backend itself (under the prefix cache), so it is opened once the
    // engine owns the backend: a drafter opened before would outlive a backend that an engine
    // refusing the tokenizer destroyed, and detach from it when unwound.
    Sequence& watched = *backend;
    auto engine = std::make_unique<ModelEngine>(std::move(pool), std::move(model), std::move(backend), std::move(*tok),
                                                id_from_path(options.model_path));
    OpenedDrafter drafter = open_drafter(options.draft, engine->model(), watched);
    engine->set_prefix_cache(options.prefix_cache_bytes);
    engine->model_path_ = options.model_path;
    // --draft auto starts from what the last process on this model, drafts and backend
    // measured, and leaves what it measures for the next (keep_draft_memory_if_due); the site
    // is found while `drafter` still holds the gate.
    engine->memory_ = draft_memory_site(options.draft, options.model_path, watched, options.threads, drafter);
    engine->drafter_ = std::move(drafter.drafter);
    engine->draft_description_ = drafter.description;
    const DraftMemoryNotes notes = recall_draft_memory(engine->drafter_.get(), engine->memory_.path, engine->memory_.key);
    if (!notes.recalled.empty()) engine->draft_description_ += "; " + notes.recalled;
    if (!notes.warning.empty()) engine->draft_description_ += "; " + notes.warning;
    if (!options.route_trace.empty())
        engine->set_route_recorder(std::make_unique<trace::RouteRecorder>(
            options.route_trace, trace::trace_header_for(engine->model().config(), options.model_path)));
    return engine;
}

ModelEngine::~ModelEngine() { keep_draft_memory_if_due(true); }

void ModelEngine::end_sequence() {
    sequence_->end_sequence();
    keep_draft_memory_if_due(false);
}

void ModelEngine::keep_draft_memory_if_due(bool now) {
    if (memory_.path.empty()) return;
    const auto t = std::chrono::steady_clock::now();
    if (!now && memory_written_ && t - memory_time_ < kMemoryInterval) return;
    // The draft gate's memory (draft_memory.hpp): a cache, so a failure is only said.
    const std::optional<std::string> w = keep_draft_memory(drafter_.get(), memory_.path, memory_.key);
    if (!w) return;  // nothing measured yet
    memory_written_ = true;
    memory_time_ = t;
    if (!w->empty() && !memory_warned_) {
        std::fprintf(stderr, "aff-serve: %s\n", w->c_str());
        memory_warned_ = true;
    }
}

ModelEngine::ModelEngine(std::unique_ptr<ThreadPool> pool, std::unique_ptr<Model> model, std::unique_ptr<Sequence> backend,
                         tokenizer::Tokenizer tok, std::string model_id)
    : pool_(std::move(pool)), model_(std::move(model)), tokenizer_(std::move(tok)), model_id_(std::move(model_id)) {
    if (!backend) throw_internal("ModelEngine: no forward backend");
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
    std::vector<bool> has_text(V, false);
    for (std::size_t id = 0; id < V; ++id) has_text[id] = tokenizer_.contains(tokenizer::TokenId(id));
    for (int id : model_->config().eos_token_ids)
        if (id >= 0 && std::size_t(id) < V) end_tokens_[std::size_t(id)] = true;
    if (auto eos = tokenizer_.token_to_id(chat::dsv4::eos)) end_tokens_[std::size_t(*eos)] = true;
    std::int32_t assistant = -1;
    if (auto a = tokenizer_.token_to_id(chat::dsv4::assistant)) assistant = *a;
    sequence_ = std::make_unique<PrefixCachedSequence>(std::move(backend), std::move(has_text), assistant);
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

void ModelEngine::set_route_recorder(std::unique_ptr<trace::RouteRecorder> recorder) {
    sequence_->set_route_recorder(recorder.get());
    recorder_ = std::move(recorder);
}

bool ModelEngine::is_end_token(std::int32_t token) const {
    return token >= 0 && std::size_t(token) < end_tokens_.size() && end_tokens_[std::size_t(token)];
}

}  // namespace aff::serve
