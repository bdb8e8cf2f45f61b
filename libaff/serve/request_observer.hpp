// What a watcher of the server (aff-serve's live view) learns about each generation
// request: when it queues, when it gets the engine, each token it generates, each verified
// draft proposal (the figures /metrics counts), each forward call (with the sequence, for
// what it can tell between calls: its expert tiers), and when it ends. The server calls these
// on its connection threads; an observer must be thread-safe and quick (it runs inside the
// generation loop, once a token).
#pragma once

#include "libaff/serve/engine.hpp"
#include "libaff/serve/generation.hpp"

#include <cstddef>
#include <cstdint>

namespace aff::serve {

class RequestObserver {
public:
    virtual ~RequestObserver() = default;
    // Returns the id the other calls name the request by.
    virtual std::uint64_t queued(std::size_t prompt_tokens) = 0;
    virtual void started(std::uint64_t id) = 0;
    // cached_tokens: the prompt tokens the prefix cache supplied (known once the prefill ran).
    virtual void token(std::uint64_t id, std::size_t cached_tokens) = 0;
    // After each verified proposal of the drafter: the generation's statistics so far.
    virtual void verified(std::uint64_t /*id*/, const GenerateStats& /*so_far*/) {}
    // After each forward call, on the thread that made it (the sequence is between calls).
    virtual void dispatched(std::uint64_t /*id*/, const Sequence& /*sequence*/) {}
    virtual void finished(std::uint64_t id) = 0;
};

// One request as an observer sees it, from construction (queued) to destruction
// (finished); with no observer every call does nothing.
class ObservedRequest {
public:
    ObservedRequest(RequestObserver* observer, std::size_t prompt_tokens)
        : observer_(observer), id_(observer ? observer->queued(prompt_tokens) : 0) {}
    ~ObservedRequest() {
        if (observer_) observer_->finished(id_);
    }
    ObservedRequest(const ObservedRequest&) = delete;
    ObservedRequest& operator=(const ObservedRequest&) = delete;

    void started() {
        if (observer_) observer_->started(id_);
    }
    // The hooks with every generated token, verified proposal and forward call reported
    // before the caller's own hooks see them.
    GenerateHooks observe(GenerateHooks hooks, Engine& engine) {
        if (!observer_) return hooks;
        auto inner = std::move(hooks.on_step);
        hooks.on_step = [this, &engine, inner = std::move(inner)](const GenerationStep& step) {
            if (step.token >= 0) observer_->token(id_, engine.cached_tokens());
            return !inner || inner(step);
        };
        auto verified = std::move(hooks.on_verified);
        hooks.on_verified = [this, verified = std::move(verified)](const GenerateStats& so_far) {
            observer_->verified(id_, so_far);
            if (verified) verified(so_far);
        };
        auto dispatched = std::move(hooks.between_dispatches);
        hooks.between_dispatches = [this, &engine, dispatched = std::move(dispatched)](const Dispatch& d) {
            observer_->dispatched(id_, engine.sequence());
            if (dispatched) dispatched(d);
        };
        return hooks;
    }

private:
    RequestObserver* observer_;
    std::uint64_t id_;
};

}  // namespace aff::serve
