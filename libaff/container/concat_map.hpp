// Maps several files end to end into one contiguous read-only range, so the parts of
// a split container can be validated by the ordinary reader without writing their
// concatenation. Possible only when every file but the last is a whole number of
// pages (aff-split's default part size is); can_map() says whether it is.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace aff {

class ConcatenatedMap {
public:
    static bool can_map(const std::vector<std::uint64_t>& sizes);
    // Throws aff::Error (io) naming the file that cannot be opened or mapped.
    explicit ConcatenatedMap(const std::vector<std::string>& paths);
    ~ConcatenatedMap();
    ConcatenatedMap(const ConcatenatedMap&) = delete;
    ConcatenatedMap& operator=(const ConcatenatedMap&) = delete;

    std::span<const std::uint8_t> bytes() const { return {base_, size_}; }

private:
    std::uint8_t* base_ = nullptr;
    std::size_t size_ = 0, reserved_ = 0;
};

}  // namespace aff
