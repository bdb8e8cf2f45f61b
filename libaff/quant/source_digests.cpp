// Hashing a container's source files (source_digests.hpp).
#include "libaff/quant/source_digests.hpp"

#include "libaff/container/sha256sums.hpp"
#include "libaff/core/hash.hpp"

#include "libaff/core/error.hpp"

#include <atomic>
#include <filesystem>
#include <future>
#include <mutex>

namespace aff::quant {

namespace {
// Lets the worker threads advance one Progress, one call at a time.
class SharedProgress final : public Progress {
public:
    explicit SharedProgress(Progress& inner) : inner_(inner) {}
    void begin(const std::string&, std::uint64_t, const std::string&) override {}
    void end() override {}
    void advance(std::uint64_t n) override {
        std::lock_guard lock(mutex_);
        inner_.advance(n);
    }
    void note(const std::string& line) override {
        std::lock_guard lock(mutex_);
        inner_.note(line);
    }

private:
    Progress& inner_;
    std::mutex mutex_;
};

// Reports nothing; stops the hashing (an exception out of sha256_file's next read) once
// `stop` is set.
class StoppableProgress final : public Progress {
public:
    explicit StoppableProgress(const std::atomic<bool>& stop) : stop_(stop) {}
    void begin(const std::string&, std::uint64_t, const std::string&) override {}
    void end() override {}
    void advance(std::uint64_t) override {
        if (stop_.load(std::memory_order_relaxed)) throw_internal("hashing stopped");
    }
    void note(const std::string&) override {}

private:
    const std::atomic<bool>& stop_;
};
}  // namespace

struct BackgroundHashes::State {
    std::atomic<bool> stop{false};
    StoppableProgress progress{stop};
    std::future<nlohmann::json> result;
};

BackgroundHashes::BackgroundHashes(std::vector<std::string> paths, std::size_t threads)
    : state_(std::make_unique<State>()) {
    State* st = state_.get();
    st->result = std::async(std::launch::async, [st, threads, paths = std::move(paths)] {
        ThreadPool pool(std::max<std::size_t>(threads, 1));
        return hash_sources(paths, pool, st->progress);
    });
}

BackgroundHashes::~BackgroundHashes() {
    if (!state_->result.valid()) return;
    state_->stop = true;
    try {
        state_->result.get();
    } catch (...) {  // stopped, or failed with nobody left to tell
    }
}

nlohmann::json BackgroundHashes::get() {
    if (!state_->result.valid()) throw_internal("BackgroundHashes::get called twice");
    return state_->result.get();
}

nlohmann::json hash_sources(const std::vector<std::string>& paths, ThreadPool& pool, Progress& progress) {
    std::uint64_t total = 0;
    for (const auto& p : paths) {
        std::error_code ec;
        const auto n = std::filesystem::file_size(p, ec);
        if (!ec) total += n;
    }
    std::vector<std::string> digests(paths.size());
    progress.begin("hashing sources", total, "B");
    SharedProgress shared(progress);
    pool.parallel_for(paths.size(), [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) digests[i] = to_hex(sha256_file(paths[i], shared));
    });
    progress.end();
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < paths.size(); ++i)
        out.push_back({{"file", std::filesystem::path(paths[i]).filename().string()}, {"sha256", digests[i]}});
    return out;
}

}  // namespace aff::quant
