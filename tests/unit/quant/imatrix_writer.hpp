// Small writers of llama.cpp imatrix files (GGUF and legacy .dat) for the tests of the
// imatrix readers and of the quantiser's imatrix path: the layouts llama-imatrix writes
// (general.type, datasets, chunk count; F32 in_sum2/counts tensors aligned to 32).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace aff::test {

using Bytes = std::vector<std::uint8_t>;

template <class T>
inline void put(Bytes& b, T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
}
inline void put_str(Bytes& b, const std::string& s) {
    put<std::uint64_t>(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
}

struct GgufTensor {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::vector<float> data;
};

// A GGUF imatrix as llama-imatrix writes one: general.type, datasets, chunk count.
inline Bytes gguf(const std::vector<GgufTensor>& tensors, const std::string& type = "imatrix", std::uint32_t version = 3) {
    Bytes b = {'G', 'G', 'U', 'F'};
    put<std::uint32_t>(b, version);
    put<std::uint64_t>(b, tensors.size());
    put<std::uint64_t>(b, 3);
    put_str(b, "general.type");
    put<std::uint32_t>(b, 8);
    put_str(b, type);
    put_str(b, "imatrix.datasets");
    put<std::uint32_t>(b, 9);
    put<std::uint32_t>(b, 8);
    put<std::uint64_t>(b, 1);
    put_str(b, "calibration.txt");
    put_str(b, "imatrix.chunk_count");
    put<std::uint32_t>(b, 4);
    put<std::uint32_t>(b, 12);
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        put_str(b, t.name);
        put<std::uint32_t>(b, static_cast<std::uint32_t>(t.ne.size()));
        for (auto d : t.ne) put<std::uint64_t>(b, d);
        put<std::uint32_t>(b, 0);  // F32
        put<std::uint64_t>(b, offset);
        offset += (t.data.size() * 4 + 31) / 32 * 32;
    }
    while (b.size() % 32) b.push_back(0);
    for (const auto& t : tensors) {
        for (float v : t.data) put(b, v);
        while (b.size() % 32) b.push_back(0);
    }
    return b;
}

inline Bytes dat(const std::vector<std::pair<std::string, std::vector<float>>>& entries, std::int32_t ncall, bool trailer) {
    Bytes b;
    put<std::int32_t>(b, static_cast<std::int32_t>(entries.size()));
    for (const auto& [name, values] : entries) {
        put<std::int32_t>(b, static_cast<std::int32_t>(name.size()));
        b.insert(b.end(), name.begin(), name.end());
        put<std::int32_t>(b, ncall);
        put<std::int32_t>(b, static_cast<std::int32_t>(values.size()));
        for (float v : values) put(b, v);
    }
    if (trailer) {
        put<std::int32_t>(b, 7);
        put<std::int32_t>(b, 4);
        b.insert(b.end(), {'w', 'i', 'k', 'i'});
    }
    return b;
}


}  // namespace aff::test
