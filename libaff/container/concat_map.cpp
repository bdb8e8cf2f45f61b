// A PROT_NONE reservation of the whole length, then each file mapped over its slice
// with MAP_FIXED; unmapping the reservation releases everything at once.
#include "libaff/container/concat_map.hpp"

#include "libaff/core/error.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aff {
namespace {
std::uint64_t page_size() { return static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)); }
}  // namespace

bool ConcatenatedMap::can_map(const std::vector<std::uint64_t>& sizes) {
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i)
        if (sizes[i] % page_size() != 0) return false;
    return true;
}

ConcatenatedMap::ConcatenatedMap(const std::vector<std::string>& paths) {
    std::vector<int> fds;
    std::vector<std::uint64_t> sizes;
    auto close_all = [&] {
        for (int fd : fds) ::close(fd);
    };
    for (const std::string& p : paths) {
        const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            const int err = errno;
            close_all();
            throw_errno("cannot open", p, err);
        }
        fds.push_back(fd);
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            close_all();
            throw_io("not a regular file", p);
        }
        sizes.push_back(static_cast<std::uint64_t>(st.st_size));
        size_ += static_cast<std::size_t>(st.st_size);
    }
    if (!can_map(sizes)) {
        close_all();
        throw_internal("ConcatenatedMap: parts are not whole pages");
    }
    reserved_ = (size_ + page_size() - 1) / page_size() * page_size();
    if (reserved_ == 0) {
        close_all();
        return;
    }
    void* base = ::mmap(nullptr, reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        const int err = errno;
        close_all();
        throw_errno("cannot reserve address space for the parts", paths.front(), err);
    }
    base_ = static_cast<std::uint8_t*>(base);
    std::uint64_t off = 0;
    for (std::size_t i = 0; i < fds.size(); ++i) {
        if (sizes[i] > 0 &&
            ::mmap(base_ + off, sizes[i], PROT_READ, MAP_SHARED | MAP_FIXED, fds[i], 0) == MAP_FAILED) {
            const int err = errno;
            close_all();
            ::munmap(base_, reserved_);
            base_ = nullptr;
            throw_errno("cannot map", paths[i], err);
        }
        off += sizes[i];
    }
    close_all();
}

ConcatenatedMap::~ConcatenatedMap() {
    if (base_) ::munmap(base_, reserved_);
}

}  // namespace aff
