// Two buffers: while the sinks consume buffer k%2, buffer (k+1)%2 is being filled. Also the
// read-ahead file handle its callers (and sha256_file) open.
#include "libaff/container/pipelined_read.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <memory>
#include <unistd.h>

namespace aff {
namespace {

constexpr std::size_t kBlockBytes = 8u << 20;

std::size_t read_full(int fd, std::uint8_t* buf, std::size_t n, const std::string& path) {
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(fd, buf + got, n - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_errno("cannot read", path, errno);
        }
        if (r == 0) break;
        got += static_cast<std::size_t>(r);
    }
    return got;
}

}  // namespace

SequentialFile::SequentialFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw_errno("cannot open", path, errno);
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

SequentialFile::~SequentialFile() { ::close(fd_); }

std::uint64_t pipelined_read(int fd, const std::string& path, std::uint64_t size, std::uint64_t boundary,
                             ThreadPool& pool, std::span<const BlockSink> sinks,
                             const std::function<void(std::size_t)>& on_block) {
    if (size == 0) return 0;
    auto block_at = [&](std::uint64_t off) {
        std::uint64_t n = std::min<std::uint64_t>(kBlockBytes, size - off);
        if (boundary) n = std::min(n, boundary - off % boundary);
        return static_cast<std::size_t>(n);
    };
    std::unique_ptr<std::uint8_t[]> buffers[2] = {std::make_unique<std::uint8_t[]>(kBlockBytes),
                                                  std::make_unique<std::uint8_t[]>(kBlockBytes)};
    std::uint64_t read_bytes = 0;
    auto fill = [&](std::uint64_t off, std::uint8_t* buf) {
        const std::size_t want = block_at(off);
        const std::size_t got = read_full(fd, buf, want, path);
        read_bytes += got;
        if (got != want) throw_io("file ended early (it shrank while being read?)", path);
    };
    fill(0, buffers[0].get());
    std::size_t k = 0;
    for (std::uint64_t off = 0; off < size; ++k) {
        const std::uint8_t* cur = buffers[k % 2].get();
        std::uint8_t* next = buffers[(k + 1) % 2].get();
        const std::size_t n = block_at(off);
        const std::uint64_t next_off = off + n;
        pool.parallel_for(sinks.size() + 1, [&](std::size_t begin, std::size_t end) {
            for (std::size_t task = begin; task < end; ++task) {
                if (task < sinks.size()) sinks[task](off, cur, n);
                else if (next_off < size) fill(next_off, next);
            }
        });
        if (on_block) on_block(n);
        off = next_off;
    }
    return read_bytes;
}

}  // namespace aff
