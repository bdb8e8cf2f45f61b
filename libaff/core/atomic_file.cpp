// AtomicFile, commit_together and the registry of temporaries that the signal handlers
// clean up.
#include "libaff/core/atomic_file.hpp"

#include "libaff/core/error.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aff {
namespace {

constexpr std::size_t kBufferBytes = 4u << 20;

// Fixed slots of C strings so the signal handler never touches a container that another
// thread might be resizing.
constexpr int kRegistrySlots = 64;
std::array<std::atomic<const char*>, kRegistrySlots> g_registry{};

int register_temporary(const char* path) {
    for (int i = 0; i < kRegistrySlots; ++i) {
        const char* expected = nullptr;
        if (g_registry[i].compare_exchange_strong(expected, path)) return i;
    }
    return -1;  // more than 64 concurrent writers: cleanup on a signal is best effort
}

void unregister_temporary(int& slot) {
    if (slot >= 0) g_registry[slot].store(nullptr);
    slot = -1;
}

// Points the file's slot at `path` (registering it if it has none).
void register_as(int& slot, const char* path) {
    if (slot >= 0) g_registry[slot].store(path);
    else slot = register_temporary(path);
}

void write_all(int fd, const std::uint8_t* p, std::size_t n, const std::string& path) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw_errno("write failed", path, errno);
        }
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

// 16 hex digits from the kernel's generator: a name nobody can plant a file at ahead of us.
std::string random_suffix() {
    std::uint64_t r = 0;
    if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r))
        throw_errno("cannot get random bytes for a temporary name", "getrandom", errno);
    char buf[24];
    std::snprintf(buf, sizeof buf, ".tmp-%016llx", static_cast<unsigned long long>(r));
    return buf;
}

std::string folder_of(const std::string& path) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    return dir.empty() ? std::string(".") : dir.string();
}

}  // namespace

void remove_registered_temporaries() noexcept {
    for (auto& slot : g_registry) {
        const char* p = slot.load();
        if (p) ::unlink(p);
    }
}

void check_output_path(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;  // absent (or unreachable: creating it will say why)
    if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) return;
    if (S_ISDIR(st.st_mode)) throw_io("is a directory, not a file that can be written", path);
    const char* what = S_ISFIFO(st.st_mode)  ? "a FIFO"
                       : S_ISCHR(st.st_mode) ? "a character device"
                       : S_ISBLK(st.st_mode) ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw_io(std::string("is ") + what + "; outputs are written only to regular files (refusing to replace it)", path);
}

AtomicFile::AtomicFile(std::string final_path) : final_path_(std::move(final_path)) {
    check_output_path(final_path_);
    fd_ = ::open(folder_of(final_path_).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (fd_ >= 0) {
        temp_path_ = "/proc/self/fd/" + std::to_string(fd_);
        if (::access(temp_path_.c_str(), F_OK) == 0) {
            unnamed_ = true;
        } else {  // no /proc: the unnamed file could never be given a name
            ::close(fd_);
            fd_ = -1;
        }
    } else if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
        throw_errno("cannot create", final_path_, errno);
    }
    for (int attempt = 0; fd_ < 0; ++attempt) {
        temp_path_ = final_path_ + random_suffix();
        fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd_ < 0 && (errno != EEXIST || attempt > 8)) throw_errno("cannot create", temp_path_, errno);
    }
    if (!unnamed_) registry_slot_ = register_temporary(temp_path_.c_str());
    buffer_.reserve(kBufferBytes);
}

AtomicFile::~AtomicFile() {
    if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
    unregister_temporary(registry_slot_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!unnamed_) ::unlink(temp_path_.c_str());
    if (!link_path_.empty()) ::unlink(link_path_.c_str());
}

// Errors name what the user asked for: /proc/self/fd/N would mean nothing to them.
const std::string& AtomicFile::error_name() const { return unnamed_ ? final_path_ : temp_path_; }

void AtomicFile::flush_buffer() {
    if (!buffer_.empty()) {
        write_all(fd_, buffer_.data(), buffer_.size(), error_name());
        buffer_.clear();
    }
}

void AtomicFile::write(const void* data, std::size_t size) {
    if (committed_) throw_internal("write after commit: " + final_path_);
    const auto* p = static_cast<const std::uint8_t*>(data);
    if (buffer_.size() + size > kBufferBytes) {
        flush_buffer();
        if (size >= kBufferBytes) {
            write_all(fd_, p, size, error_name());
            offset_ += size;
            return;
        }
    }
    buffer_.insert(buffer_.end(), p, p + size);
    offset_ += size;
}

void AtomicFile::write_zeros(std::size_t size) {
    static const std::array<std::uint8_t, 4096> zeros{};
    while (size > 0) {
        std::size_t n = size < zeros.size() ? size : zeros.size();
        write(zeros.data(), n);
        size -= n;
    }
}

void AtomicFile::pad_to(std::uint64_t alignment) {
    std::uint64_t rem = offset_ % alignment;
    if (rem != 0) write_zeros(static_cast<std::size_t>(alignment - rem));
}

void AtomicFile::write_at(std::uint64_t offset, const void* data, std::size_t size) {
    if (offset + size > offset_) throw_internal("write_at past the end of " + error_name());
    flush_buffer();
    const auto* p = static_cast<const std::uint8_t*>(data);
    while (size > 0) {
        ssize_t w = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
        if (w < 0) {
            if (errno == EINTR) continue;
            throw_errno("write failed", error_name(), errno);
        }
        p += w;
        offset += static_cast<std::uint64_t>(w);
        size -= static_cast<std::size_t>(w);
    }
}

void AtomicFile::commit() { commit_file(false); }

void AtomicFile::commit_file(bool keep_cleanup) {
    if (committed_) return;
    flush_buffer();
    if (::fsync(fd_) != 0) throw_errno("fsync failed", error_name(), errno);
    // Something put at the final name while we wrote must not be replaced either.
    check_output_path(final_path_);
    // With keep_cleanup a signal must find the final name registered from the instant the
    // file appears there: registering it after the link or rename left a window in which an
    // interrupted aff-split kept one finished part (tests/cli/kill_test.py caught it about one
    // run in 20 under load). The name is claimed before it exists only when nothing is at it,
    // so a signal in between removes nothing of anyone's.
    struct stat st {};
    int final_slot = -1;
    if (keep_cleanup && ::lstat(final_path_.c_str(), &st) != 0 && errno == ENOENT)
        final_slot = register_temporary(final_path_.c_str());
    struct Claim {
        int& slot;
        bool kept = false;
        ~Claim() {
            if (!kept) unregister_temporary(slot);
        }
    } claim{final_slot};
    std::string renamed = temp_path_;
    if (unnamed_) {
        // Straight to the final name when it is free (linkat never replaces), else under
        // a fresh random name that the rename then moves over the old file.
        if (::linkat(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, final_path_.c_str(), AT_SYMLINK_FOLLOW) == 0) {
            renamed.clear();
        } else if (errno != EEXIST) {
            throw_errno("cannot link the finished file at its final name", final_path_, errno);
        } else {
            unregister_temporary(final_slot);  // someone else's file appeared at the name: not ours to remove
            for (int attempt = 0;; ++attempt) {
                link_path_ = final_path_ + random_suffix();
                register_as(registry_slot_, link_path_.c_str());
                if (::linkat(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, link_path_.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
                const int e = errno;
                if (e != EEXIST || attempt > 8) {
                    link_path_.clear();
                    unregister_temporary(registry_slot_);
                    throw_errno("cannot link the finished file beside its final name", final_path_, e);
                }
            }
            renamed = link_path_;
        }
    }
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_errno("close failed", error_name(), errno);
    if (!renamed.empty() && ::rename(renamed.c_str(), final_path_.c_str()) != 0)
        throw_errno("cannot rename " + renamed + " to final name", final_path_, errno);
    committed_ = true;
    link_path_.clear();
    if (keep_cleanup && final_slot >= 0) {  // already registered: drop the temporary's slot
        unregister_temporary(registry_slot_);
        registry_slot_ = final_slot;
        claim.kept = true;
    } else if (keep_cleanup) {
        register_as(registry_slot_, final_path_.c_str());
    } else {
        unregister_temporary(registry_slot_);
    }
    // The new name is durable only once the directory entry is on disk.
    int dfd = ::open(folder_of(final_path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

void commit_together(std::span<AtomicFile* const> files) {
    std::size_t committed = 0;
    try {
        for (AtomicFile* f : files) {
            f->commit_file(true);
            ++committed;
        }
    } catch (...) {
        for (std::size_t i = 0; i < committed; ++i) {
            unregister_temporary(files[i]->registry_slot_);
            ::unlink(files[i]->final_path_.c_str());
        }
        throw;
    }
    for (AtomicFile* f : files) unregister_temporary(f->registry_slot_);
}

void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes) {
    AtomicFile out(path);
    out.write(bytes);
    out.commit();
}

}  // namespace aff
