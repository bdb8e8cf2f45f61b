// The sequence aff-serve runs on a real model: the backend's (libaff/runtime/open_sequence.hpp)
// with the server's prefix cache (prefix_cache.hpp) around each prompt, and the logits of ids
// the tokenizer does not know (the vocabulary is padded past its last id) set to -infinity:
// they have no text, so they are never sampled.
//
// The first forward after reset() is the prompt. It runs as two calls split at
// snapshot_point(), cache or not. With the cache: it restores the longest cached prefix of
// the prompt (leaving at least the last token to run, for its logits), runs up to the snapshot
// point, snapshots there, then runs the rest. On the CPU the logits are those of one whole
// prefill, bit for bit (its forward does not depend on chunking;
// tests/unit/runtime/sequence_snapshot_test.cpp checks it). On the GPU they are those of the
// same calls on a fresh state (tests/gpu/snapshot_test.cpp): a miss computes what a server
// without the cache does, and a restored end of a generation holds its reply's tokens as
// decode steps ran them, where a server without the cache prefills them (the GEMMs' bf16
// inputs against the GEMVs' fp32: logits may differ in their last bits, rarely the chosen
// token). A prompt asked for with all_logits runs as one call without the cache.
// end_sequence() snapshots the sequence as it ends (prompt and generated tokens).
#pragma once

#include "libaff/runtime/sequence.hpp"
#include "libaff/serve/prefix_cache.hpp"
#include "libaff/trace/recorder.hpp"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace aff::serve {

class PrefixCachedSequence final : public Sequence {
public:
    // has_text[id]: the tokenizer knows id (one entry per vocabulary id). assistant_token:
    // <｜Assistant｜>, or -1 where the tokenizer has none.
    PrefixCachedSequence(std::unique_ptr<Sequence> backend, std::vector<bool> has_text, std::int32_t assistant_token);

    std::string describe() const override { return backend_->describe(); }
    bool on_gpu() const override { return backend_->on_gpu(); }
    ExpertTierSnapshot expert_tiers() const override { return backend_->expert_tiers(); }
    std::size_t vocab_size() const override { return backend_->vocab_size(); }
    std::int64_t position() const override { return backend_->position(); }
    void reset() override;
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override;
    // The backend's picks among the ids with text when those are a prefix of the vocabulary
    // (the padded tail masked by the cut); the prompt, and a mask with holes, pick from
    // forward's masked rows.
    std::vector<std::int32_t> forward_ids(std::span<const std::int32_t> tokens, bool all_rows,
                                          std::size_t candidates, const RowSampling* sampling = nullptr) override;
    void set_rewind_depth(std::size_t tokens) override { backend_->set_rewind_depth(tokens); }
    std::size_t rewind_depth() const override { return backend_->rewind_depth(); }
    std::int64_t rewind_floor() const override { return backend_->rewind_floor(); }
    void set_route_observer(RouteObserver* observer) override { backend_->set_route_observer(observer); }
    std::string placement_summary() const override { return backend_->placement_summary(); }
    std::optional<TierStats> tier_stats() const override { return backend_->tier_stats(); }
    // The backend's tier counters as of its last forward (nothing: not tiered). Safe to call
    // from any thread (the /metrics scrape).
    std::optional<TierStats> published_tier_stats() const;

    // --route-trace (not owned; null: none): each generation is one sequence of the trace,
    // its prompt prefill, a later call decode unless label_next_call said otherwise, and the
    // tokens a rewind runs again replay; end_sequence() publishes the file.
    void set_route_recorder(trace::RouteRecorder* recorder);
    // The trace phase of the next forward call after the prompt (the generation loop's
    // before_dispatch: a verify call's tokens are draft-verify); one call only.
    void label_next_call(trace::Phase phase) { next_phase_ = phase; }

    // Sets the prefix cache's budget (0: off) and drops what it held. Without a call there is
    // no cache.
    void set_prefix_cache(std::size_t bytes);
    // "prefix cache 4.00 GiB", "prefix cache off", or why there is none.
    const std::string& prefix_cache_description() const { return cache_description_; }
    // The cache's counters, or nothing when it is off. Safe to call from any thread.
    std::optional<PrefixCacheStats> prefix_cache_stats() const;
    // Prompt tokens the last prompt took from the cache instead of computing them.
    std::size_t cached_tokens() const { return cached_tokens_; }
    // Snapshots the sequence as it ends, unless cached; publishes the route trace.
    void end_sequence();

private:
    void rewind_to(std::int64_t position) override;
    // A call of the backend, `run(prompt)`, with the trace's phase, the tokens and the tier
    // counters kept around it.
    template <class Run>
    auto tracked(std::span<const std::int32_t> tokens, Run run);
    std::vector<float> run_prompt(std::span<const std::int32_t> tokens);
    std::vector<float> mask(std::vector<float> logits) const;
    // Snapshots the backend under `tokens` (the tokens it has run) unless already cached.
    void keep_snapshot(std::span<const std::int32_t> tokens);
    // Where a prompt of 2+ tokens is snapshotted: just after a <｜Assistant｜> among its last
    // 8 tokens (the template's opening of the reply), else before its last token.
    std::size_t snapshot_point(std::span<const std::int32_t> tokens) const;
    void publish_stats();

    std::unique_ptr<Sequence> backend_;
    std::vector<bool> has_text_;
    std::size_t text_prefix_ = 0;  // has_text_ is true below this and false from it; 0: not so
    std::vector<std::int32_t> no_text_;  // the ids has_text_ leaves out, ascending
    std::int32_t assistant_token_ = -1;
    PrefixCache cache_{0};
    std::string cache_description_ = "prefix cache off";
    bool fresh_ = true;                    // reset and not run yet: the next forward is a prompt
    std::vector<std::int32_t> sequence_;   // the tokens the backend has run, while it is consistent
    bool sequence_valid_ = false;          // false while a forward is under way or after it threw
    std::size_t cached_tokens_ = 0;
    trace::RouteRecorder* recorder_ = nullptr;
    std::uint32_t trace_sequence_ = 0;
    trace::Phase next_phase_ = trace::Phase::decode;
    mutable std::mutex stats_mutex_;       // guards stats_ and tier_stats_, read by the /metrics thread
    std::optional<PrefixCacheStats> stats_;
    std::optional<TierStats> tier_stats_;
};

}  // namespace aff::serve
