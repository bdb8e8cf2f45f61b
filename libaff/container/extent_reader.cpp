// ExtentReader (extent_reader.hpp): a queue of reads served by a few threads, each a loop of
// pread calls until the extent is in (a pread may return less than asked).
#include "libaff/container/extent_reader.hpp"

#include "libaff/core/error.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aff {

int ExtentReader::open_file(const char* path, int flags) { return ::open(path, flags); }

ExtentReader::ExtentReader(const std::string& path, int threads, bool direct, OpenFn open) : path_(path) {
    if (direct) {
        fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
        direct_ = fd_ >= 0;
        // EINVAL: the filesystem does not take O_DIRECT; read through the page cache instead.
        if (fd_ < 0 && errno != EINVAL) throw_errno("cannot open for reading", path, errno);
    }
    if (fd_ < 0) {
        fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) throw_errno("cannot open for reading", path, errno);
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        const int e = errno;
        ::close(fd_);
        throw_errno("cannot stat", path, e);
    }
    file_size_ = static_cast<std::uint64_t>(st.st_size);
    for (int i = 0; i < (threads < 1 ? 1 : threads); ++i) threads_.emplace_back([this] { work(); });
}

ExtentReader::~ExtentReader() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    queued_.notify_all();
    for (std::thread& t : threads_) t.join();
    if (fd_ >= 0) ::close(fd_);
}

std::uint64_t ExtentReader::submit(std::uint64_t offset, std::uint64_t size, void* dst) {
    if (offset % kAlign != 0)
        throw_usage("ExtentReader: offset " + std::to_string(offset) + " of " + path_ + " is not a multiple of 4096");
    if (reinterpret_cast<std::uintptr_t>(dst) % kAlign != 0)
        throw_usage("ExtentReader: the destination buffer is not 4096-byte aligned");
    std::lock_guard<std::mutex> lock(mutex_);
    const std::uint64_t ticket = next_ticket_++;
    queue_.push_back({ticket, offset, size, dst});
    queued_.notify_one();
    return ticket;
}

void ExtentReader::wait(std::uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (ticket == 0 || ticket >= next_ticket_) throw_usage("ExtentReader: unknown ticket " + std::to_string(ticket));
    finished_.wait(lock, [&] { return done_.count(ticket) != 0; });
    const std::exception_ptr error = done_[ticket];
    done_.erase(ticket);
    if (error) std::rethrow_exception(error);
}

ExtentReader::Stats ExtentReader::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

void ExtentReader::work() {
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping, nothing left
            job = queue_.front();
            queue_.pop_front();
        }
        std::exception_ptr error;
        try {
            run(job);
        } catch (...) {
            error = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_[job.ticket] = error;
            if (!error) ++stats_.reads, stats_.bytes += job.size;
        }
        finished_.notify_all();
    }
}

void ExtentReader::run(const Job& job) const {
    // Whole blocks with O_DIRECT; the file may end inside the last one, so at least `size` bytes
    // must come back, not all of them.
    const std::uint64_t want = direct_ ? staging_bytes(job.size) : job.size;
    std::uint64_t got = 0;
    auto* dst = static_cast<unsigned char*>(job.dst);
    while (got < want) {
        const ssize_t n = ::pread(fd_, dst + got, want - got, static_cast<off_t>(job.offset + got));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_errno("read of " + std::to_string(job.size) + " bytes at offset " + std::to_string(job.offset) +
                            " failed",
                        path_, errno);
        }
        if (n == 0) break;  // end of file
        got += static_cast<std::uint64_t>(n);
        if (direct_ && static_cast<std::uint64_t>(n) % kAlign != 0) break;  // a short O_DIRECT read ends at EOF
    }
    if (got < job.size)
        throw_io("truncated: an extent of " + std::to_string(job.size) + " bytes at offset " +
                     std::to_string(job.offset) + " gave " + std::to_string(got) + " bytes",
                 path_);
}

}  // namespace aff
