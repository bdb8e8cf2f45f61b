// Digests used across aff: XXH3-64 for the container's per-tensor digests (fast enough
// to check 160 GB at load), SHA-256 for files exchanged with the outside world
// (SHA256SUMS beside Hub uploads). Both stream, so callers never hold a whole file.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace aff {

std::uint64_t xxh3_64(const void* data, std::size_t size);
inline std::uint64_t xxh3_64(std::span<const std::uint8_t> bytes) { return xxh3_64(bytes.data(), bytes.size()); }

class Xxh3Stream {
public:
    Xxh3Stream();
    ~Xxh3Stream();
    Xxh3Stream(const Xxh3Stream&) = delete;
    Xxh3Stream& operator=(const Xxh3Stream&) = delete;
    void update(const void* data, std::size_t size);
    std::uint64_t digest() const;

private:
    void* state_;
};

using Sha256Digest = std::array<std::uint8_t, 32>;

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(const void* data, std::size_t size);
    void update(std::span<const std::uint8_t> bytes) { update(bytes.data(), bytes.size()); }
    Sha256Digest finish();

private:
    void* ctx_;
};

Sha256Digest sha256(const void* data, std::size_t size);
std::string to_hex(std::span<const std::uint8_t> bytes);
std::string to_hex(std::uint64_t value);  // 16 lower-case digits
// Parses exactly 2·N hex digits (either case); false on anything else.
bool from_hex(std::string_view text, std::span<std::uint8_t> out);

// splitmix64's finaliser: a cheap, well-mixed bijection of 64 bits. Formats define
// pseudo-random values with it (the quantiser's rotation signs, its training samples)
// because a spec can state it in one line and a GPU kernel can recompute it.
constexpr std::uint64_t splitmix64_mix(std::uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
constexpr std::uint64_t kSplitmix64Gamma = 0x9E3779B97F4A7C15ull;
// One step of the splitmix64 generator from state x.
constexpr std::uint64_t splitmix64(std::uint64_t x) { return splitmix64_mix(x + kSplitmix64Gamma); }

}  // namespace aff
