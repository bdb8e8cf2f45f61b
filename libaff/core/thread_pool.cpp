// ThreadPool: workers wait for a generation counter to change, run their share of the
// current job, and report back; no task queue is needed for parallel_for alone.
#include "libaff/core/thread_pool.hpp"

#include <algorithm>
#include <exception>

namespace aff {

std::size_t hardware_threads() {
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : n;
}

ThreadPool::ThreadPool(std::size_t threads) {
    if (threads == 0) threads = hardware_threads();
    for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(std::size_t index) {
    std::size_t seen = 0;
    for (;;) {
        const std::function<void(std::size_t)>* job;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || job_generation_ != seen; });
            if (stop_) return;
            seen = job_generation_;
            job = job_;
        }
        (*job)(index);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (--pending_ == 0) done_.notify_one();
        }
    }
}

void ThreadPool::parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn,
                              std::size_t min_chunk) {
    if (n == 0) return;
    const std::size_t parts = std::max<std::size_t>(1, std::min(size(), (n + min_chunk - 1) / std::max<std::size_t>(min_chunk, 1)));
    if (parts == 1) {
        fn(0, n);
        return;
    }
    std::exception_ptr first_error;
    std::mutex error_mutex;
    const std::function<void(std::size_t)> part = [&](std::size_t index) {
        if (index >= parts) return;
        std::size_t begin = n * index / parts, end = n * (index + 1) / parts;
        try {
            if (begin < end) fn(begin, end);
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!first_error) first_error = std::current_exception();
        }
    };
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = &part;
        pending_ = workers_.size();
        ++job_generation_;
    }
    wake_.notify_all();
    part(0);
    {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return pending_ == 0; });
        job_ = nullptr;
    }
    if (first_error) std::rethrow_exception(first_error);
}

}  // namespace aff
