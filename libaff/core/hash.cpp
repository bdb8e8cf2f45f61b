// XXH3 through libxxhash, SHA-256 through OpenSSL's EVP interface.
#include "libaff/core/hash.hpp"

#include "libaff/core/error.hpp"

#include <openssl/evp.h>
#include <xxhash.h>

namespace aff {

std::uint64_t xxh3_64(const void* data, std::size_t size) { return XXH3_64bits(data, size); }

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
    if (!state_) throw_internal("XXH3_createState failed");
    XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}
Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Xxh3Stream::update(const void* data, std::size_t size) {
    XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}
std::uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1)
        throw_internal("cannot initialise SHA-256");
}
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void Sha256::update(const void* data, std::size_t size) {
    EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size);
}
Sha256Digest Sha256::finish() {
    Sha256Digest out{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out.data(), &len);
    return out;
}

Sha256Digest sha256(const void* data, std::size_t size) {
    Sha256 h;
    h.update(data, size);
    return h.finish();
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    s.reserve(bytes.size() * 2);
    for (std::uint8_t b : bytes) {
        s.push_back(digits[b >> 4]);
        s.push_back(digits[b & 15]);
    }
    return s;
}

std::string to_hex(std::uint64_t value) {
    static const char* digits = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i) {
        s[i] = digits[value & 15];
        value >>= 4;
    }
    return s;
}

bool from_hex(std::string_view text, std::span<std::uint8_t> out) {
    if (text.size() != out.size() * 2) return false;
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    for (std::size_t i = 0; i < out.size(); ++i) {
        int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return true;
}

}  // namespace aff
