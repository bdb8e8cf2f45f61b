// The generation loop of generate.hpp. Generation that needs nothing of the logits but their
// picks (no constraint, no logprobs, no logits hook, nothing forced) runs picks-only: every
// call is Sequence::forward_ids, so on the GPU a decode step or a verify call of k+1 tokens
// brings back k+1 ids, not k+1 rows of the vocabulary, and the guesses are checked against
// those ids. Greedy, the picks are greedy_pick's (the same tokens either way); sampled with the
// temperature the one filter, they are sampled_pick's (sampled_pick.hpp: positional draws, a
// verify call's speculative acceptance made where the logits are), which draws differently
// from the Sampler of the logits path but from the same distribution. Other filters (top-k,
// top-p, min-p) need the sorted order: those generations take the logits path.
#include "libaff/runtime/generate.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/sampled_pick.hpp"
#include "libaff/runtime/stop_matcher.hpp"

#include <algorithm>
#include <chrono>
#include <string>

namespace aff {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One generation's working state: what the options and hooks say, and where the sequence is.
class Loop {
public:
    Loop(Sequence& seq, const GenerateOptions& o, const GenerateHooks& h)
        : seq_(seq), o_(o), h_(h), vocab_(seq.vocab_size()), sampler_(o.sampling), stops_(o.stop),
          picks_(!o.constraint && o.logprobs < 0 && !h.on_logits && o.forced.empty()
                     ? (o.sampling.temperature == 0.0f ? Picks::greedy
                        : o.sampling.top_k == 0 && o.sampling.top_p >= 1.0f && o.sampling.min_p == 0.0f ? Picks::sampled
                                                                                                        : Picks::none)
                     : Picks::none) {}

    GenerateStats run();

private:
    // One forward call (logits), or its picks (picks-only), timed and told to the hooks.
    std::vector<float> dispatch(std::span<const std::int32_t> tokens, bool all_logits, Dispatch::Kind kind);
    // `draft`: the drafter whose distributions a sampled verify call checks its guesses against.
    std::vector<std::int32_t> dispatch_ids(std::span<const std::int32_t> tokens, bool all_rows, Dispatch::Kind kind,
                                           const Drafter* draft = nullptr);
    template <class Call>
    auto timed(std::size_t tokens, Dispatch::Kind kind, Call call);
    bool emit(GenerationStep& step) {
        stats_.text += step.text;
        return !h_.on_step || h_.on_step(step);
    }
    bool cancelled() const { return h_.cancelled && h_.cancelled(); }
    // Runs `token` at position_ (with the drafter's guesses after it, when it has any) and
    // leaves its logits in logits_.
    void advance(std::int32_t token, bool last, std::size_t budget_left);
    // Takes the next logits from the last verify call when `token` is the guess it ran.
    bool take_guess(std::int32_t token);
    // Drops what is left of the guesses, rewinding the sequence to position_.
    void drop_guesses();
    // The drafter and the statistics hear how the last proposal fared.
    void note_verified(std::size_t proposed, std::size_t accepted);
    // The next token from `logits` (the target's, masked when constrained): speculative
    // sampling against the pending guess's draft distribution when it has one, else plain.
    std::int32_t choose(std::span<const float> logits);
    void report_logits(std::int32_t token) {
        if (h_.on_logits) h_.on_logits(position_ - 1, token, logits_);
    }

    Sequence& seq_;
    const GenerateOptions& o_;
    const GenerateHooks& h_;
    const std::size_t vocab_;
    Sampler sampler_;
    StopMatcher stops_;
    enum class Picks { none, greedy, sampled };
    const Picks picks_;
    bool picks_only() const { return picks_ != Picks::none; }
    GenerateStats stats_;
    std::int64_t position_ = 0;  // where the next token runs in a run without a drafter
    std::vector<float> logits_;  // predicting the token at position_
    std::vector<float> masked_;  // logits_ under the constraint, when there is one
    // Picks-only: the pick predicting the token at position_ (in place of logits_), and the
    // last verify call's picks (in place of rows_).
    std::int32_t pick_ = 0;
    std::vector<std::int32_t> row_picks_;
    // The drafter's state: the tokens so far, and the last verify call's guesses and rows
    // (rows_[j] follows the call's j-th input); next_ guesses were accepted.
    Drafter* drafter_ = nullptr;
    std::vector<std::int32_t> context_;
    std::vector<std::int32_t> guesses_;
    std::vector<float> rows_;
    std::vector<float> draft_q_;  // [guesses, V] when the drafter gave distributions, else empty
    std::size_t next_ = 0;
    // The sequence's rewind depth of its own, and while verifying (see advance()).
    std::size_t own_depth_ = 0, verify_depth_ = 0;
};

template <class Call>
auto Loop::timed(std::size_t tokens, Dispatch::Kind kind, Call call) {
    const std::int64_t at = seq_.position();
    if (h_.before_dispatch) h_.before_dispatch(Dispatch{kind, at, tokens, 0});
    const auto t0 = Clock::now();
    auto out = call();
    const double seconds = seconds_since(t0);
    if (kind != Dispatch::Kind::prompt) {
        stats_.decode_forward_seconds += seconds;
        ++stats_.decode_forwards;
    }
    if (h_.between_dispatches) h_.between_dispatches(Dispatch{kind, at, tokens, seconds});
    return out;
}

std::vector<float> Loop::dispatch(std::span<const std::int32_t> tokens, bool all_logits, Dispatch::Kind kind) {
    return timed(tokens.size(), kind, [&] { return seq_.forward(tokens, all_logits); });
}

std::vector<std::int32_t> Loop::dispatch_ids(std::span<const std::int32_t> tokens, bool all_rows, Dispatch::Kind kind,
                                             const Drafter* draft) {
    if (picks_ == Picks::greedy) return timed(tokens.size(), kind, [&] { return seq_.forward_ids(tokens, all_rows, vocab_); });
    // Row j of the rows back chooses the token at the call's first position + j + 1 (the last
    // row alone: the one after the call).
    const std::size_t rows = all_rows ? tokens.size() : 1;
    const std::int64_t first = seq_.position() + std::int64_t(tokens.size() - rows) + 1;
    const std::vector<double> u = positional_uniforms(o_.sampling.seed, first, rows);
    const RowSampling sampling{o_.sampling.temperature, u, draft};
    return timed(tokens.size(), kind, [&] { return seq_.forward_ids(tokens, all_rows, vocab_, &sampling); });
}

bool Loop::take_guess(std::int32_t token) {
    if (next_ >= guesses_.size() || guesses_[next_] != token) return false;
    ++next_;
    ++stats_.accepted_tokens;
    if (picks_only())
        pick_ = row_picks_[next_];
    else
        logits_.assign(rows_.begin() + std::ptrdiff_t(next_ * vocab_), rows_.begin() + std::ptrdiff_t((next_ + 1) * vocab_));
    ++position_;
    report_logits(token);
    if (next_ == guesses_.size()) {
        note_verified(guesses_.size(), next_);
        guesses_.clear();
        next_ = 0;
    }
    return true;
}

void Loop::drop_guesses() {
    if (guesses_.empty()) return;
    if (seq_.position() > position_) {
        // The verify call ran at position_ - next_ - 1 (its first token, then the guesses).
        const std::int64_t call = position_ - std::int64_t(next_) - 1;
        if (h_.before_dispatch) h_.before_dispatch(Dispatch{Dispatch::Kind::replay, call, next_ + 1, 0});
        seq_.rewind(position_);
    }
    note_verified(guesses_.size(), next_);
    guesses_.clear();
    next_ = 0;
}

void Loop::note_verified(std::size_t proposed, std::size_t accepted) {
    ++stats_.verify_calls;
    if (stats_.drafted_at.size() < proposed) {
        stats_.drafted_at.resize(proposed, 0);
        stats_.accepted_at.resize(proposed, 0);
    }
    for (std::size_t i = 0; i < proposed; ++i) ++stats_.drafted_at[i];
    for (std::size_t i = 0; i < accepted; ++i) ++stats_.accepted_at[i];
    drafter_->verified(proposed, accepted);
    if (h_.on_verified) h_.on_verified(stats_);
}

std::int32_t Loop::choose(std::span<const float> logits) {
    if (next_ < guesses_.size() && !draft_q_.empty())
        return sampler_.speculative(logits, guesses_[next_],
                                    std::span<const float>(draft_q_).subspan(next_ * vocab_, vocab_));
    return sampler_.sample(logits);
}

void Loop::advance(std::int32_t token, bool last, std::size_t budget_left) {
    if (take_guess(token)) return;
    drop_guesses();
    std::vector<std::int32_t> guesses;
    if (drafter_ && !last) {
        guesses = drafter_->propose(context_);
        guesses.resize(std::min({guesses.size(), drafter_->max_tokens(), budget_left}));
    }
    // Only a verify call is ever rewound, and by the time of the next call it has been: a plain
    // step needs no undo record (on the GPU those are device copies a call, a sizeable part of
    // a small model's step), so the depth a rewind needs is kept for verify calls alone.
    if (drafter_) seq_.set_rewind_depth(guesses.empty() ? own_depth_ : verify_depth_);
    if (guesses.empty()) {
        const std::int32_t one[1] = {token};
        if (picks_only())
            pick_ = dispatch_ids(one, false, Dispatch::Kind::decode).front();
        else
            logits_ = dispatch(one, false, Dispatch::Kind::decode);
    } else {
        std::vector<std::int32_t> chunk{token};
        chunk.insert(chunk.end(), guesses.begin(), guesses.end());
        if (picks_only()) {
            // Sampled guesses drawn from distributions are verified against them; plain ones
            // only by the rows' own draws (take_guess).
            const bool drawn = picks_ == Picks::sampled &&
                               (drafter_->draft_on_device() || !drafter_->draft_distribution(0).empty());
            row_picks_ = dispatch_ids(chunk, true, Dispatch::Kind::verify, drawn ? drafter_ : nullptr);
            pick_ = row_picks_.front();
        } else {
            rows_ = dispatch(chunk, true, Dispatch::Kind::verify);
            logits_.assign(rows_.begin(), rows_.begin() + std::ptrdiff_t(vocab_));
        }
        stats_.drafted_tokens += guesses.size();
        // The logits path's copy of the draft distributions, when the drafter drew its guesses
        // from some (never at temperature 0).
        draft_q_.clear();
        if (!picks_only() && !drafter_->draft_distribution(0).empty()) {
            draft_q_.resize(guesses.size() * vocab_);
            for (std::size_t j = 0; j < guesses.size(); ++j) {
                const std::span<const float> q = drafter_->draft_distribution(j);
                if (q.size() != vocab_) throw_internal("a draft distribution that does not cover the vocabulary");
                std::copy(q.begin(), q.end(), draft_q_.begin() + std::ptrdiff_t(j * vocab_));
            }
        }
        guesses_ = std::move(guesses);
        next_ = 0;
    }
    ++position_;
    report_logits(token);
}

GenerateStats Loop::run() {
    stats_.prompt_tokens = o_.prompt.size();
    if (cancelled()) {
        stats_.finish = FinishReason::cancelled;
        return stats_;
    }
    const bool want_logits = static_cast<bool>(h_.on_logits);
    // Before the prompt: a drafter that watches the sequence's forward calls learns that a
    // generation begins with them.
    if (h_.drafter && o_.forced.empty()) h_.drafter->start(o_.sampling);
    const std::int64_t start = seq_.position();
    const auto t0 = Clock::now();
    if (picks_only())
        pick_ = dispatch_ids(o_.prompt, false, Dispatch::Kind::prompt).front();
    else
        logits_ = dispatch(o_.prompt, want_logits, Dispatch::Kind::prompt);
    stats_.prefill_seconds = seconds_since(t0);
    position_ = start + static_cast<std::int64_t>(o_.prompt.size());
    if (want_logits) {
        for (std::size_t i = 0; i < o_.prompt.size(); ++i)
            h_.on_logits(start + static_cast<std::int64_t>(i), o_.prompt[i],
                         std::span<const float>(logits_).subspan(i * vocab_, vocab_));
        logits_.erase(logits_.begin(), logits_.end() - std::ptrdiff_t(vocab_));  // keep the last row
    }
    const auto t1 = Clock::now();

    const bool forcing = !o_.forced.empty();
    const std::size_t budget = forcing ? o_.forced.size() : o_.max_new_tokens;
    // With a drafter the sequence keeps enough to rewind past a rejected guess while the loop
    // runs, and goes back to its own depth after, also when a forward throws.
    struct DepthGuard {
        Sequence* seq = nullptr;
        std::size_t depth = 0;
        ~DepthGuard() {
            if (seq) seq->set_rewind_depth(depth);
        }
    } depth_guard;
    if (h_.drafter && !forcing) {
        drafter_ = h_.drafter;
        depth_guard.depth = own_depth_ = seq_.rewind_depth();
        depth_guard.seq = &seq_;
        verify_depth_ = std::max(own_depth_, drafter_->max_tokens());
        seq_.set_rewind_depth(verify_depth_);
        context_ = o_.prompt;
    }
    StepLogprob lp;
    stats_.finish = FinishReason::length;
    for (std::size_t i = 0; i < budget; ++i) {
        std::int32_t token;
        if (forcing) {
            token = o_.forced[i];
        } else if (picks_only()) {
            token = pick_;  // greedy_pick's or sampled_pick's choice, made where the logits are
        } else if (o_.constraint) {
            masked_.assign(logits_.begin(), logits_.end());
            o_.constraint->mask(masked_);
            token = choose(masked_);
            o_.constraint->accept(token);
        } else {
            token = choose(logits_);
        }
        ++stats_.generated_tokens;
        if (drafter_) context_.push_back(token);
        GenerationStep step;
        step.token = token;
        if (o_.logprobs >= 0) {
            lp.token = token;
            lp.logprob = token_logprob(logits_, token);
            lp.top = top_logprobs(logits_, static_cast<std::size_t>(o_.logprobs));
            step.logprob = &lp;
        }
        if (!forcing && o_.is_end_token && o_.is_end_token(token)) {
            if (o_.text) step.text = stops_.flush() + o_.text->finish();
            emit(step);
            stats_.finish = FinishReason::stop;
            stats_.ended_by_end_token = true;
            break;
        }
        if (o_.text) {
            bool hit = false;
            step.text = stops_.push(o_.text->push(token), hit);
            if (hit) {
                emit(step);
                stats_.finish = FinishReason::stop;
                break;
            }
        }
        if (!emit(step)) {
            stats_.finish = FinishReason::cancelled;
            break;
        }
        // The last token needs a forward only when its logits are asked for.
        const bool last = i + 1 == budget;
        if (last && !want_logits) break;
        if (cancelled()) {
            stats_.finish = FinishReason::cancelled;
            break;
        }
        advance(token, last, budget - i - 1);
    }
    if (stats_.finish == FinishReason::length && o_.text) {
        // Out of budget: whatever was held back for a stop string is answer text.
        GenerationStep tail;
        tail.token = -1;
        bool hit = false;
        tail.text = stops_.push(o_.text->finish(), hit);
        if (!hit) tail.text += stops_.flush();
        if (!tail.text.empty()) emit(tail);
    }
    if (drafter_) drop_guesses();
    stats_.decode_seconds = seconds_since(t1);
    return stats_;
}

}  // namespace

const char* to_string(FinishReason reason) {
    switch (reason) {
        case FinishReason::stop: return "stop";
        case FinishReason::length: return "length";
        case FinishReason::cancelled: return "cancelled";
    }
    return "stop";
}

void check_tokens_in_vocabulary(std::size_t vocab, std::span<const std::int32_t> tokens, const char* what) {
    for (std::int32_t t : tokens)
        if (t < 0 || static_cast<std::size_t>(t) >= vocab)
            throw_usage(std::string(what) + " token " + std::to_string(t) + " is outside the model's vocabulary (0.." +
                        std::to_string(vocab - 1) + ")");
}

GenerateStats generate(Sequence& sequence, const GenerateOptions& options, const GenerateHooks& hooks) {
    if (options.prompt.empty()) throw_usage("the prompt is empty");
    check_tokens_in_vocabulary(sequence.vocab_size(), options.prompt, "prompt");
    check_tokens_in_vocabulary(sequence.vocab_size(), options.forced, "forced");
    if (!options.stop.empty() && !options.text) throw_usage("stop strings need the generation's text (a text stream)");
    Loop loop(sequence, options, hooks);
    return loop.run();
}

}  // namespace aff
