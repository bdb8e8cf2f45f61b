// Writes a file so that it appears under its final name only when complete
// (design.md: "Nothing half-written is ever loadable"). Data goes to
// "<name>.tmp-<pid>" beside the target; commit() flushes, fsyncs, renames over the
// target and fsyncs the directory. Destroyed without commit(), or interrupted by SIGINT,
// SIGTERM or SIGHUP (see remove_registered_temporaries), the temporary is deleted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace aff {

class AtomicFile {
public:
    explicit AtomicFile(std::string final_path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, std::size_t size);
    void write(std::span<const std::uint8_t> bytes) { write(bytes.data(), bytes.size()); }
    void write_zeros(std::size_t size);
    // Pads with zeros up to the next multiple of `alignment` (a power of two).
    void pad_to(std::uint64_t alignment);
    // Overwrites bytes already written (headers whose fields are known only at the end).
    void write_at(std::uint64_t offset, const void* data, std::size_t size);
    std::uint64_t offset() const { return offset_; }

    void commit();
    const std::string& final_path() const { return final_path_; }
    const std::string& temp_path() const { return temp_path_; }

private:
    void flush_buffer();
    void discard() noexcept;

    std::string final_path_;
    std::string temp_path_;
    int fd_ = -1;
    int registry_slot_ = -1;
    std::uint64_t offset_ = 0;
    std::vector<std::uint8_t> buffer_;
    bool committed_ = false;
};

// A whole small file written through an AtomicFile.
void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes);

// Unlinks every temporary file of a live AtomicFile. Async-signal-safe: the tools' signal
// handlers (libaff/ui/cli.cpp) call it before the process ends.
void remove_registered_temporaries() noexcept;

}  // namespace aff
