// The imatrix reader on a file llama.cpp's llama-imatrix wrote, not one of our writers':
// tests/data/imatrix/tinyllama-legacy.imatrix.dat.zst, the legacy .dat form for a
// TinyLlama-shaped model (22 layers, hidden 2048, FFN 5632; 365 chunks of the dataset
// "imatrix-training-full-3"), published as imatrix.dat in the MIT-licensed public GitHub
// repository calcuis/gguf-quantizor (commit 22c74b1). The expected numbers come from
// tests/oracle/imatrix_dat_facts.py, which reads the layout with Python's struct alone.
// (No small GGUF-form file from llama-imatrix was found in public repositories.)
#include "libaff/quant/expert_importance.hpp"
#include "libaff/quant/imatrix.hpp"

#include <catch2/catch.hpp>
#include <zstd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

using namespace aff::quant;

namespace {

std::vector<std::uint8_t> read_zst(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    const std::string packed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const unsigned long long size = ZSTD_getFrameContentSize(packed.data(), packed.size());
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) throw std::runtime_error(path + ": bad zstd");
    std::vector<std::uint8_t> out(size);
    const std::size_t got = ZSTD_decompress(out.data(), out.size(), packed.data(), packed.size());
    if (ZSTD_isError(got) || got != size) throw std::runtime_error(path + ": zstd decompression failed");
    return out;
}

}  // namespace

TEST_CASE("a legacy .dat imatrix written by llama-imatrix reads as its bytes say", "[quant]") {
    const auto bytes = read_zst(std::string(AFF_TEST_DATA) + "/imatrix/tinyllama-legacy.imatrix.dat.zst");
    REQUIRE(bytes.size() == 1582051);
    const Imatrix im = parse_imatrix(bytes, "imatrix.dat");
    CHECK(im.legacy);
    REQUIRE(im.entries.size() == 154);  // 22 layers x 7 matrices
    CHECK(im.chunk_count == 365);
    CHECK(im.datasets == std::vector<std::string>{"imatrix-training-full-3"});
    CHECK(im.entries.front().name == "blk.21.ffn_up.weight");
    for (const ImatrixEntry& e : im.entries) {
        INFO(e.name);
        CHECK(e.ncall == 365);
        CHECK((e.sum2.size() == 2048 || e.sum2.size() == 5632));
        for (float v : e.sum2) REQUIRE((std::isfinite(v) && v >= 0.0f));
    }
    const ImatrixEntry* down = im.find("blk.0.ffn_down.weight");
    REQUIRE(down);
    REQUIRE(down->sum2.size() == 5632);
    CHECK(down->sum2.front() == Approx(20.3533688).epsilon(1e-8));
    CHECK(down->sum2.back() == Approx(19.9784813).epsilon(1e-8));
    double sum = 0;
    for (float v : down->sum2) sum += v;
    CHECK(sum == Approx(149976.173794).epsilon(1e-9));
    // E[x²] per column is the stored value over ncall.
    const std::vector<float> imp = im.importance(*down, 0, 5632, 1);
    CHECK(imp.front() == Approx(20.3533688 / 365).epsilon(1e-6));
    const ImatrixEntry* q = im.find("blk.21.attn_q.weight");
    REQUIRE(q);
    CHECK(q->sum2.front() == Approx(26.6442471).epsilon(1e-8));
    CHECK(q->sum2.back() == Approx(29.8615627).epsilon(1e-8));
    CHECK_FALSE(im.find("blk.22.attn_q.weight"));
}
