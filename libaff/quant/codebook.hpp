// The codebook shared by every quantised tensor of a container: 4096 two-dimensional
// fp16 entries indexed by a 12-bit trellis window (formats/quant-codebook.md §3). This
// file holds the type, its byte serialisation (a standalone file or a container
// section) and the built-in default; how windows pick entries is trellis.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace aff::quant {

class Codebook {
public:
    static constexpr int kWindowBits = 12;
    static constexpr int kEntries = 1 << kWindowBits;
    static constexpr int kDim = 2;
    static constexpr std::size_t kHeaderBytes = 32;
    static constexpr std::size_t kSerializedBytes = kHeaderBytes + kEntries * kDim * 2;

    // values: kEntries·kDim fp16 bit patterns, entry-major. Throws aff::Error (format)
    // on a wrong count or a value that is not finite.
    explicit Codebook(std::span<const std::uint16_t> fp16_values);

    // The codebook aff-quantize uses unless given one (trained once, committed; see
    // codebook_train.hpp for how it was made).
    static const Codebook& builtin();

    // Parses the serialised form; a non-empty `what` ("section codebook") is added to
    // the context of errors.
    static Codebook parse(std::span<const std::uint8_t> bytes, const std::string& what);
    static Codebook read_file(const std::string& path);
    std::vector<std::uint8_t> serialize() const;
    void write_file(const std::string& path) const;

    // XXH3-64 of the fp16 values as stored (little-endian): the codebook's identity,
    // recorded by every container that uses it.
    std::uint64_t digest() const { return digest_; }
    std::span<const std::uint16_t> fp16_values() const { return fp16_; }
    // Decoded values, structure of arrays so the encoder's inner loops vectorise.
    const float* coord0() const { return c0_.data(); }
    const float* coord1() const { return c1_.data(); }

private:
    std::vector<std::uint16_t> fp16_;
    // Cache-line aligned: the search loads 16 entries at a time.
    alignas(64) std::array<float, kEntries> c0_{};
    alignas(64) std::array<float, kEntries> c1_{};
    std::uint64_t digest_ = 0;
};

}  // namespace aff::quant
