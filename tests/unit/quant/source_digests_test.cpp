// Tests for the provenance digests (libaff/quant/source_digests.hpp): names without their
// directory, SHA-256 of the bytes, the same from the background hasher aff-quantize runs
// while it quantises, and its errors and early stop.
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/source_digests.hpp"

#include "../temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

using namespace aff::quant;

namespace {
std::string write_file(const aff::test::TempDir& dir, const std::string& name, std::size_t size, unsigned seed) {
    std::string bytes(size, '\0');
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 2654435761u + seed) >> 13);
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return dir / name;
}
}  // namespace

TEST_CASE("source digests: one {file, sha256} per path, in order, in the background too", "[quant]") {
    aff::test::TempDir dir;
    std::vector<std::string> paths;
    for (unsigned i = 0; i < 5; ++i) paths.push_back(write_file(dir, "f" + std::to_string(i) + ".bin", 100000 + i * 7919, i));
    aff::ThreadPool pool(2);
    const nlohmann::json direct = hash_sources(paths, pool, aff::null_progress());
    REQUIRE(direct.size() == 5);
    for (unsigned i = 0; i < 5; ++i) {
        std::ifstream in(paths[i], std::ios::binary);
        const std::string bytes{std::istreambuf_iterator<char>(in), {}};
        CHECK(direct[i].at("file") == "f" + std::to_string(i) + ".bin");
        CHECK(direct[i].at("sha256") ==
              aff::to_hex(aff::sha256(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size())));
    }
    for (std::size_t threads : {1, 3}) {
        BackgroundHashes background(paths, threads);
        CHECK(background.get() == direct);
        CHECK_THROWS_WITH(background.get(), Catch::Contains("called twice"));
    }
}

TEST_CASE("source digests: a missing file is the background hasher's error; dropping it early is fine", "[quant]") {
    aff::test::TempDir dir;
    const std::string good = write_file(dir, "a.bin", 1 << 20, 1);
    BackgroundHashes missing({good, dir / "gone.bin"}, 2);
    CHECK_THROWS_WITH(missing.get(), Catch::Contains("gone.bin"));
    { BackgroundHashes dropped({good, good, good}, 1); }  // destroyed before get(): stops, no error escapes
}
