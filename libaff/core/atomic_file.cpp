// AtomicFile and the registry of temporaries that the SIGINT handler cleans up.
#include "libaff/core/atomic_file.hpp"

#include "libaff/core/error.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
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
    return -1;  // more than 64 concurrent writers: cleanup on SIGINT is best effort
}

void unregister_temporary(int slot) {
    if (slot >= 0) g_registry[slot].store(nullptr);
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

}  // namespace

void remove_registered_temporaries() noexcept {
    for (auto& slot : g_registry) {
        const char* p = slot.load();
        if (p) ::unlink(p);
    }
}

AtomicFile::AtomicFile(std::string final_path) : final_path_(std::move(final_path)) {
    temp_path_ = final_path_ + ".tmp-" + std::to_string(::getpid());
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_errno("cannot create", temp_path_, errno);
    registry_slot_ = register_temporary(temp_path_.c_str());
    buffer_.reserve(kBufferBytes);
}

AtomicFile::~AtomicFile() {
    if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
    unregister_temporary(registry_slot_);
    registry_slot_ = -1;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(temp_path_.c_str());
}

void AtomicFile::flush_buffer() {
    if (!buffer_.empty()) {
        write_all(fd_, buffer_.data(), buffer_.size(), temp_path_);
        buffer_.clear();
    }
}

void AtomicFile::write(const void* data, std::size_t size) {
    if (committed_) throw_internal("write after commit: " + final_path_);
    const auto* p = static_cast<const std::uint8_t*>(data);
    if (buffer_.size() + size > kBufferBytes) {
        flush_buffer();
        if (size >= kBufferBytes) {
            write_all(fd_, p, size, temp_path_);
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
    if (offset + size > offset_) throw_internal("write_at past the end of " + temp_path_);
    flush_buffer();
    const auto* p = static_cast<const std::uint8_t*>(data);
    while (size > 0) {
        ssize_t w = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
        if (w < 0) {
            if (errno == EINTR) continue;
            throw_errno("write failed", temp_path_, errno);
        }
        p += w;
        offset += static_cast<std::uint64_t>(w);
        size -= static_cast<std::size_t>(w);
    }
}

void AtomicFile::commit() {
    if (committed_) return;
    flush_buffer();
    if (::fsync(fd_) != 0) throw_errno("fsync failed", temp_path_, errno);
    if (::close(fd_) != 0) {
        fd_ = -1;
        throw_errno("close failed", temp_path_, errno);
    }
    fd_ = -1;
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0)
        throw_errno("cannot rename " + temp_path_ + " to final name", final_path_, errno);
    committed_ = true;
    unregister_temporary(registry_slot_);
    registry_slot_ = -1;
    // The rename is durable only once the directory entry is on disk.
    std::filesystem::path dir = std::filesystem::path(final_path_).parent_path();
    if (dir.empty()) dir = ".";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes) {
    AtomicFile out(path);
    out.write(bytes);
    out.commit();
}

}  // namespace aff
