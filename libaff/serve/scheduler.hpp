// One generation at a time, the others waiting in a bounded first-come queue. A full
// queue is refused at once (the server answers 503 with Retry-After) rather than
// letting requests pile up behind a long generation; a waiting request whose client
// leaves gives up its place without ever reaching the engine.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <utility>

namespace aff::serve {

class Scheduler {
public:
    explicit Scheduler(std::size_t max_waiting) : max_waiting_(max_waiting) {}

    enum class Admission { granted, queue_full, cancelled, closed };

    // Holds the engine while alive.
    class Turn {
    public:
        Turn() = default;
        explicit Turn(Scheduler* owner) : owner_(owner) {}
        Turn(Turn&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
        Turn& operator=(Turn&& other) noexcept;
        ~Turn() { release(); }
        void release();

    private:
        Scheduler* owner_ = nullptr;
    };

    // Waits for the engine; `cancelled` is polled every 50 ms while waiting.
    Admission acquire(Turn& turn, const std::function<bool()>& cancelled);

    // Shutting down: every waiter and every later request is answered `closed`.
    void close();

    std::size_t waiting() const;
    bool busy() const;

private:
    void release_one();

    const std::size_t max_waiting_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    bool busy_ = false;
    bool closed_ = false;
    std::size_t waiting_ = 0;
    std::uint64_t next_ticket_ = 0;  // FIFO: tickets are served in order
    std::uint64_t serving_ = 0;
    std::set<std::uint64_t> abandoned_;  // tickets whose waiter left
};

}  // namespace aff::serve
