// A read-only memory map of a whole file. Containers, checkpoint shards and tokenizer
// files are all read through it, so a 160 GB model costs address space, not RAM.
#pragma once

#include "libaff/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace aff {

class MappedFile {
public:
    MappedFile() = default;
    // Throws aff::Error (io) naming the path when the file cannot be opened or mapped.
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::uint8_t* data() const { return data_; }
    std::size_t size() const { return size_; }
    std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
    const std::string& path() const { return path_; }

    // Hints the kernel that the whole file will be read front to back.
    void advise_sequential() const;

private:
    void reset();

    std::string path_;
    const std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
};

// Maps `path` and returns parse(bytes). An aff::Error from parse that names no file is
// given `path`, so a format's parser can stay ignorant of where its bytes came from.
template <class Parse>
auto parse_mapped_file(const std::string& path, Parse&& parse) {
    MappedFile file(path);
    try {
        return parse(file.bytes());
    } catch (Error& e) {
        e.set_path_if_empty(path);
        throw;
    }
}

}  // namespace aff
