// Tests for libaff/container/split.cpp, pipelined_read.cpp, concat_map.cpp and the
// parts check of verify.cpp, on files large enough to cross read blocks (8 MiB).
#include "tiny_fixture.hpp"

#include "libaff/container/concat_map.hpp"
#include "libaff/container/sha256sums.hpp"
#include "libaff/container/split.hpp"
#include "libaff/container/verify.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"

#include "../file_bytes.hpp"
#include "../temp_dir.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

using aff::test::TempDir;

using aff::test::read_all;
using aff::test::write_all;

}  // namespace

TEST_CASE("part names have five-digit index and count and parse back", "[container]") {
    CHECK(aff::part_name("m.aff", 2, 14) == "m.aff.part-00002-of-00014");
    auto p = aff::parse_part_name("m.aff.part-00002-of-00014");
    REQUIRE(p);
    CHECK(p->base == "m.aff");
    CHECK(p->index == 2);
    CHECK(p->count == 14);
    CHECK_FALSE(aff::parse_part_name("m.aff.part-00015-of-00014"));
    CHECK_FALSE(aff::parse_part_name("m.aff.part-0001-of-00014"));
    CHECK_FALSE(aff::parse_part_name("m.aff.part-00000-of-00014"));
    CHECK_FALSE(aff::parse_part_name(".part-00001-of-00001"));
}

TEST_CASE("a split across read blocks is byte-exact, hashed right and read once", "[container]") {
    TempDir dir;
    const auto data = aff::test::fixture_bytes((20u << 20) + 12345, 3);  // 20 MiB + a tail
    write_all(dir / "big.bin", data);
    aff::SplitOptions opt;
    opt.max_size = 7u << 20;  // parts end inside read blocks
    const aff::SplitResult r = aff::split_file(dir / "big.bin", opt, aff::null_progress());
    REQUIRE(r.parts.size() == 3);
    CHECK(r.bytes_read == data.size());
    CHECK(aff::to_hex(r.digest) == aff::to_hex(aff::sha256(data.data(), data.size())));
    std::vector<std::uint8_t> joined;
    for (std::size_t i = 0; i < 3; ++i) {
        const auto part = read_all(r.parts[i].path);
        CHECK(part.size() == (i < 2 ? (7u << 20) : data.size() - (14u << 20)));
        CHECK(r.parts[i].digest == aff::sha256(part.data(), part.size()));
        joined.insert(joined.end(), part.begin(), part.end());
    }
    CHECK(joined == data);
    const auto sums = aff::read_sha256sums(dir / "SHA256SUMS");
    REQUIRE(sums.size() == 4);
    CHECK(sums[3].name == "big.bin");
    CHECK(sums[3].digest == r.digest);

    aff::PartsOptions popt;
    const aff::PartsReport pr = aff::verify_parts(r.parts[1].path, popt, aff::null_progress());
    CHECK(pr.ok());
    CHECK(pr.sums.size() == 4);
    CHECK_FALSE(pr.is_container);
    CHECK(pr.size == data.size());
}

TEST_CASE("an empty file splits into one empty part", "[container]") {
    TempDir dir;
    write_all(dir / "e", {});
    const aff::SplitResult r = aff::split_file(dir / "e", {}, aff::null_progress());
    REQUIRE(r.parts.size() == 1);
    CHECK(r.parts[0].name == "e.part-00001-of-00001");
    CHECK(fs::file_size(r.parts[0].path) == 0);
    CHECK(aff::to_hex(r.digest) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("more than 99999 parts is refused before anything is written", "[container]") {
    TempDir dir;
    write_all(dir / "f", aff::test::fixture_bytes(100000, 1));
    aff::SplitOptions opt;
    opt.max_size = 1;
    CHECK_THROWS_WITH(aff::split_file(dir / "f", opt, aff::null_progress()),
                      Catch::Contains("would need 100000 parts; the most is 99999"));
    CHECK(std::distance(fs::directory_iterator(dir.path), {}) == 1);
}

TEST_CASE("parts of whole pages map end to end into the original bytes", "[container]") {
    TempDir dir;
    aff::test::write_tiny_fixture(dir / "t.aff");
    const auto whole = read_all(dir / "t.aff");
    aff::SplitOptions opt;
    opt.max_size = 4096;
    const aff::SplitResult r = aff::split_file(dir / "t.aff", opt, aff::null_progress());
    std::vector<std::string> paths;
    std::vector<std::uint64_t> sizes;
    for (const auto& p : r.parts) paths.push_back(p.path), sizes.push_back(p.size);
    REQUIRE(aff::ConcatenatedMap::can_map(sizes));
    const aff::ConcatenatedMap map(paths);
    CHECK(std::equal(whole.begin(), whole.end(), map.bytes().begin(), map.bytes().end()));
    CHECK_FALSE(aff::ConcatenatedMap::can_map({4096, 100, 5}));
}

TEST_CASE("with an output directory the sums file names the whole file relative to its own folder", "[container]") {
    TempDir dir;
    write_all(dir / "m.bin", aff::test::fixture_bytes(10000, 2));
    fs::create_directory(dir / "out");
    aff::SplitOptions opt;
    opt.max_size = 4096;
    opt.output_dir = dir / "out";
    const aff::SplitResult r = aff::split_file(dir / "m.bin", opt, aff::null_progress());
    CHECK(r.listed_as == "../m.bin");
    const auto sums = aff::read_sha256sums(dir / "out/SHA256SUMS");
    REQUIRE(sums.size() == 4);
    CHECK(sums[0].name == "m.bin.part-00001-of-00003");
    CHECK(sums[3].name == "../m.bin");
    // `sha256sum -c` run in the folder finds every file it lists, and so does aff-verify.
    const aff::SumsReport check = aff::check_sha256sums(dir / "out/SHA256SUMS", {}, aff::null_progress());
    CHECK(check.ok());
    const aff::PartsReport parts = aff::verify_parts(r.parts[0].path, {}, aff::null_progress());
    CHECK(parts.ok());
    REQUIRE(parts.sums.size() == 4);
    // Beside the file, the name alone.
    const aff::SplitResult beside = aff::split_file(dir / "m.bin", {}, aff::null_progress());
    CHECK(beside.listed_as == "m.bin");
}
