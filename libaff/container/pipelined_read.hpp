// Reading a file once and handing each block to several consumers at the same time
// (a whole-file hash, a part's hash, a part's file), while the next block is read.
// aff-split and aff-verify --parts are bound by SHA-256 and the disk; this keeps both
// busy on a 2-core machine without ever holding more than two blocks.
#pragma once

#include "libaff/core/thread_pool.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace aff {

// A file opened read-only for one pass from start to end (the kernel told to read ahead),
// closed when this goes out of scope. Throws aff::Error naming `path` if it cannot be opened.
class SequentialFile {
public:
    explicit SequentialFile(const std::string& path);
    ~SequentialFile();
    SequentialFile(const SequentialFile&) = delete;
    SequentialFile& operator=(const SequentialFile&) = delete;
    int fd() const { return fd_; }

private:
    int fd_ = -1;
};

// Gets (offset in the file, bytes, length) for each block, in file order.
using BlockSink = std::function<void(std::uint64_t, const std::uint8_t*, std::size_t)>;

// Reads [0, size) of `fd` from its current position in blocks that never cross a
// multiple of `boundary` (0: no boundary). Each block goes to every sink as a separate
// task on `pool`, in parallel with the read of the next block. Throws aff::Error naming
// `path` if the file ends early. Returns the bytes read (== size).
std::uint64_t pipelined_read(int fd, const std::string& path, std::uint64_t size, std::uint64_t boundary,
                             ThreadPool& pool, std::span<const BlockSink> sinks,
                             const std::function<void(std::size_t)>& on_block = {});

}  // namespace aff
