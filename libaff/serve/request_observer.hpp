// What a watcher of the server (aff-serve's live view) learns about each generation
// request: when it queues, when it gets the engine, each token it generates, and when it
// ends. The server calls these on its connection threads; an observer must be thread-safe
// and quick (it runs inside the generation loop, once a token).
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
    // The hooks with every generated token reported before the caller's on_step sees it.
    GenerateHooks observe(GenerateHooks hooks, const Engine& engine) {
        if (!observer_) return hooks;
        auto inner = std::move(hooks.on_step);
        hooks.on_step = [this, &engine, inner = std::move(inner)](const GenerationStep& step) {
            if (step.token >= 0) observer_->token(id_, engine.cached_tokens());
            return !inner || inner(step);
        };
        return hooks;
    }

private:
    RequestObserver* observer_;
    std::uint64_t id_;
};

}  // namespace aff::serve
