// The bounded FIFO in front of the engine (see scheduler.hpp). Tickets keep arrival
// order; a cancelled waiter's ticket is skipped when its turn comes.
#include "libaff/serve/scheduler.hpp"

#include <chrono>
#include <set>

namespace aff::serve {

Scheduler::Turn& Scheduler::Turn::operator=(Turn&& other) noexcept {
    if (this != &other) {
        release();
        owner_ = std::exchange(other.owner_, nullptr);
    }
    return *this;
}

void Scheduler::Turn::release() {
    if (owner_) std::exchange(owner_, nullptr)->release_one();
}

Scheduler::Admission Scheduler::acquire(Turn& turn, const std::function<bool()>& cancelled) {
    std::unique_lock lock(mutex_);
    if (closed_) return Admission::closed;
    if (!busy_ && waiting_ == 0) {
        busy_ = true;
        turn = Turn(this);
        return Admission::granted;
    }
    if (waiting_ >= max_waiting_) return Admission::queue_full;
    ++waiting_;
    const std::uint64_t ticket = next_ticket_++;
    for (;;) {
        // Our turn when the engine is free and every earlier ticket is served or gone.
        if (!busy_ && serving_ == ticket) {
            --waiting_;
            ++serving_;
            busy_ = true;
            turn = Turn(this);
            return Admission::granted;
        }
        cv_.wait_for(lock, std::chrono::milliseconds(50));
        const bool closed = closed_;
        if (closed || (cancelled && cancelled())) {
            --waiting_;
            // Give the ticket back: if it was next, move the line on; otherwise mark
            // it so the line skips it when it comes up.
            abandoned_.insert(ticket);
            while (abandoned_.count(serving_)) abandoned_.erase(serving_++);
            cv_.notify_all();
            return closed ? Admission::closed : Admission::cancelled;
        }
    }
}

void Scheduler::release_one() {
    std::lock_guard lock(mutex_);
    busy_ = false;
    while (abandoned_.count(serving_)) abandoned_.erase(serving_++);
    cv_.notify_all();
}

void Scheduler::close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    cv_.notify_all();
}

std::size_t Scheduler::waiting() const {
    std::lock_guard lock(mutex_);
    return waiting_;
}

bool Scheduler::busy() const {
    std::lock_guard lock(mutex_);
    return busy_;
}

}  // namespace aff::serve
