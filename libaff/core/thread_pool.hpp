// A fixed pool of worker threads with one primitive, parallel_for, which is all the
// CPU reference forward, the quantiser and the hashers need. Work is split into
// contiguous index ranges so results never depend on scheduling (determinism is a
// design principle: output must be identical at any thread count).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace aff {

class ThreadPool {
public:
    // threads == 0 means one per hardware thread.
    explicit ThreadPool(std::size_t threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    std::size_t size() const { return workers_.size() + 1; }

    // Calls fn(begin, end) on disjoint ranges covering [0, n); the calling thread works
    // too. The first exception thrown by any range is rethrown here after all finish.
    void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn,
                      std::size_t min_chunk = 1);

private:
    void worker_loop(std::size_t index);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    const std::function<void(std::size_t)>* job_ = nullptr;
    std::size_t job_generation_ = 0;
    std::size_t pending_ = 0;
    bool stop_ = false;
};

std::size_t hardware_threads();

}  // namespace aff
