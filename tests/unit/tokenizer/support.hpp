// Shared by the tokenizer tests: the real DeepSeek tokenizer.json (fetched by the ctest
// fixture in setup.cmake, loaded once per process) and readers for the zstd-compressed
// corpus and golden files under tests/data/tokenizer (formats in
// tests/oracle/tokenizer_golden.py).
#pragma once

#include "libaff/core/error.hpp"
#include "libaff/tokenizer/tokenizer.hpp"

#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace aff_test {

inline std::string tokenizer_json_path() {
    if (const char* env = std::getenv("AFF_TOKENIZER_JSON")) return env;
    return AFF_TOKENIZER_JSON;
}

// Throws (so the test fails, never skips) when the fixture has not fetched the file.
inline const aff::tokenizer::Tokenizer& deepseek() {
    static const aff::tokenizer::Tokenizer tok = [] {
        std::string path = tokenizer_json_path();
        if (!std::filesystem::exists(path))
            throw std::runtime_error(path + " is missing: run ctest (fixture setup.tokenizer_json) or "
                                            "tests/oracle/fetch_tokenizer_json.sh " + path);
        return aff::tokenizer::Tokenizer::from_json_file(path);
    }();
    return tok;
}

inline std::string read_zst(const std::string& name) {
    std::string path = std::string(AFF_TEST_DATA) + "/tokenizer/" + name;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::string packed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    unsigned long long size = ZSTD_getFrameContentSize(packed.data(), packed.size());
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) throw std::runtime_error(path + ": bad zstd");
    std::string out(size, '\0');
    std::size_t got = ZSTD_decompress(out.data(), out.size(), packed.data(), packed.size());
    if (ZSTD_isError(got) || got != size) throw std::runtime_error(path + ": zstd decompression failed");
    return out;
}

// Sequential little-endian reader over a golden file.
struct Reader {
    const std::string& data;
    std::size_t pos = 0;
    bool done() const { return pos >= data.size(); }
    std::uint32_t u32() {
        if (pos + 4 > data.size()) throw std::runtime_error("golden file truncated");
        std::uint32_t v;
        std::memcpy(&v, data.data() + pos, 4);
        pos += 4;
        return v;
    }
    std::string bytes() {
        std::uint32_t n = u32();
        if (pos + n > data.size()) throw std::runtime_error("golden file truncated");
        std::string s = data.substr(pos, n);
        pos += n;
        return s;
    }
    std::vector<aff::tokenizer::TokenId> ids() {
        std::uint32_t n = u32();
        std::vector<aff::tokenizer::TokenId> v(n);
        for (auto& x : v) x = static_cast<aff::tokenizer::TokenId>(u32());
        return v;
    }
};

inline std::vector<std::string> read_corpus() {
    std::string data = read_zst("corpus.bin.zst");
    Reader r{data};
    std::vector<std::string> docs;
    while (!r.done()) docs.push_back(r.bytes());
    return docs;
}

}  // namespace aff_test
