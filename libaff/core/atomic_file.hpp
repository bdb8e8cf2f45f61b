// Writes a file so that it appears under its final name only when complete
// (design.md: "Nothing half-written is ever loadable"). Data goes to an unnamed file in
// the target's folder (O_TMPFILE), given a name only at commit(); where the file system
// has no O_TMPFILE it goes to "<name>.tmp-<16 random hex digits>", created with
// O_EXCL|O_NOFOLLOW so that nothing planted at a guessable name (a symlink, say) is ever
// written through. commit() flushes, fsyncs, renames over the target and fsyncs the
// folder. Destroyed without commit(), or interrupted by SIGINT, SIGTERM or SIGHUP (see
// remove_registered_temporaries), the temporary is deleted; killed outright, an unnamed
// temporary vanishes with the process.
//
// Only a regular file (or a symlink, which is replaced, never followed) may stand at the
// final name: a directory, FIFO, socket or device node there is refused rather than
// replaced by a regular file (check_output_path).
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
    // A path that reads back what has been written so far (flush() first): the
    // temporary's name, or /proc/self/fd/N for an unnamed temporary.
    const std::string& temp_path() const { return temp_path_; }
    // Writes the buffered bytes to the file, so temp_path() shows them.
    void flush() { flush_buffer(); }

private:
    friend void commit_together(std::span<AtomicFile* const> files);
    // commit(); with keep_cleanup the final name stays registered for removal on a
    // signal until the caller unregisters it (a set that must appear as a whole).
    void commit_file(bool keep_cleanup);
    void flush_buffer();
    void discard() noexcept;
    const std::string& error_name() const;

    std::string final_path_;
    std::string temp_path_;
    std::string link_path_;  // the name an unnamed temporary is linked under before the rename
    bool unnamed_ = false;
    int fd_ = -1;
    int registry_slot_ = -1;
    std::uint64_t offset_ = 0;
    std::vector<std::uint8_t> buffer_;
    bool committed_ = false;
};

// A whole small file written through an AtomicFile.
void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes);

// Commits every file, or none: a failure takes back the files already committed, and a
// SIGINT, SIGTERM or SIGHUP while committing removes them too. (A SIGKILL between two
// renames can leave some under final names: order the set so that its last file says
// the set is whole.)
void commit_together(std::span<AtomicFile* const> files);

// Throws aff::Error (io) naming `path` unless it is absent, a regular file or a symlink:
// what an AtomicFile may replace. Tools call it before long work, so a bad output path
// fails at once.
void check_output_path(const std::string& path);

// Unlinks every temporary file of a live AtomicFile. Async-signal-safe: the tools' signal
// handlers (libaff/ui/cli.cpp) call it before the process ends.
void remove_registered_temporaries() noexcept;

}  // namespace aff
