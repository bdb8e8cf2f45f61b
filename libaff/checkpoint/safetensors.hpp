// Reads safetensors files: an 8-byte little-endian header length, a JSON header
// mapping tensor names to dtype, shape and [begin, end) byte offsets into the data
// area that follows. The bytes are untrusted: every length, offset, shape and dtype
// is checked against the file before a tensor is handed out, and any violation is one
// aff::Error naming the file and the tensor. Files are memory-mapped, never copied.
#pragma once

#include "libaff/checkpoint/dtype.hpp"
#include "libaff/core/mapped_file.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace aff {

struct SafetensorsTensor {
    std::string name;
    DType dtype = DType::f32;
    std::vector<std::uint64_t> shape;
    std::uint64_t offset = 0;  // from the start of the file
    std::uint64_t nbytes = 0;
    std::uint64_t elements() const;
};

// Parses and validates the header of a whole file image. `path` only names the file in
// errors. Tensors come back in file order of their data.
std::vector<SafetensorsTensor> parse_safetensors(std::span<const std::uint8_t> file, const std::string& path);

class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string& path);
    const std::string& path() const { return file_.path(); }
    const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
    // nullptr when absent.
    const SafetensorsTensor* find(const std::string& name) const;
    const std::uint8_t* data(const SafetensorsTensor& t) const { return file_.data() + t.offset; }

private:
    MappedFile file_;
    std::vector<SafetensorsTensor> tensors_;
    std::unordered_map<std::string, std::size_t> index_;
};

// "[64, 128]" for messages.
std::string shape_string(std::span<const std::uint64_t> shape);

}  // namespace aff
