// The SSD tier's reader: expert extents (4 KiB-aligned, one per expert: formats/container.md) read
// from the container file on disk into caller buffers, bypassing the page cache with O_DIRECT so
// that a model larger than RAM streams from the SSD at the drive's speed instead of thrashing the
// cache, by a few threads issuing preads at once (an NVMe drive needs several requests in flight to
// reach its rate). Where the filesystem refuses O_DIRECT (tmpfs, some overlays) it reads through the
// page cache and says so (direct() is false). Reads are submitted and waited for by ticket, so a
// caller overlaps them with compute; a read that fails (a truncated file, an I/O error) rethrows
// from wait() naming the file, the offset and how many bytes came back.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace aff {

class ExtentReader {
public:
    static constexpr std::uint64_t kAlign = 4096;  // O_DIRECT alignment of offsets, lengths and buffers

    // How the file is opened: open(2) by default; a test passes one that refuses O_DIRECT the way a
    // filesystem without it does (EINVAL), to check the fallback where no such filesystem is at
    // hand (tmpfs takes O_DIRECT since Linux 6.6).
    using OpenFn = int (*)(const char* path, int flags);
    static int open_file(const char* path, int flags);

    // Opens `path` read-only (O_DIRECT unless `direct` is false or the filesystem refuses it) and
    // starts `threads` reader threads (at least 1).
    explicit ExtentReader(const std::string& path, int threads = 4, bool direct = true, OpenFn open = open_file);
    ~ExtentReader();
    ExtentReader(const ExtentReader&) = delete;
    ExtentReader& operator=(const ExtentReader&) = delete;

    const std::string& path() const { return path_; }
    bool direct() const { return direct_; }
    std::uint64_t file_size() const { return file_size_; }

    // Bytes a buffer for an extent of `size` bytes must hold: size rounded up to kAlign (O_DIRECT
    // reads whole blocks; the bytes past size are scratch).
    static std::uint64_t staging_bytes(std::uint64_t size) { return (size + kAlign - 1) / kAlign * kAlign; }

    // Queues a read of [offset, offset + size) into dst: offset a multiple of kAlign, dst aligned to
    // kAlign with staging_bytes(size) bytes (usage error otherwise, thrown here). Returns a ticket.
    std::uint64_t submit(std::uint64_t offset, std::uint64_t size, void* dst);
    // Blocks until the ticket's read is done; rethrows its error. Each ticket is waited for once.
    void wait(std::uint64_t ticket);
    // submit + wait.
    void read(std::uint64_t offset, std::uint64_t size, void* dst) { wait(submit(offset, size, dst)); }

    struct Stats {
        std::uint64_t reads = 0, bytes = 0;
    };
    Stats stats() const;

private:
    struct Job {
        std::uint64_t ticket, offset, size;
        void* dst;
    };
    void work();
    void run(const Job& job) const;

    std::string path_;
    int fd_ = -1;
    bool direct_ = false;
    std::uint64_t file_size_ = 0;
    mutable std::mutex mutex_;
    std::condition_variable queued_, finished_;
    std::deque<Job> queue_;
    std::unordered_map<std::uint64_t, std::exception_ptr> done_;  // ticket -> error (null: fine)
    std::uint64_t next_ticket_ = 1;
    bool stopping_ = false;
    Stats stats_;
    std::vector<std::thread> threads_;
};

}  // namespace aff
