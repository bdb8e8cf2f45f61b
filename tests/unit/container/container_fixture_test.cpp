// The committed fixtures: tests/data/tiny.aff must be exactly what tiny_fixture.hpp
// builds, each tests/data/bad/*.aff exactly its recipe in bad_fixtures.hpp, and each bad
// file must fail with its exact message. AFF_REGENERATE=1 rewrites the files instead
// (then review the diff and the spec's hex dump).
#include "bad_fixtures.hpp"
#include "tiny_fixture.hpp"
#include "../file_bytes.hpp"

#include "libaff/container/container.hpp"
#include "libaff/container/digests.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/progress.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

using aff::test::read_all;
using aff::test::write_all;

bool regenerate() {
    const char* v = std::getenv("AFF_REGENERATE");
    return v && std::string(v) == "1";
}

std::vector<std::uint8_t> built_tiny() {
    const fs::path tmp = fs::temp_directory_path() / ("aff-tiny-" + std::to_string(::getpid()) + ".aff");
    aff::test::write_tiny_fixture(tmp.string());
    auto bytes = read_all(tmp);
    fs::remove(tmp);
    return bytes;
}

}  // namespace

TEST_CASE("tests/data/tiny.aff is what the fixture builder writes, byte for byte", "[container]") {
    const fs::path committed = fs::path(AFF_TEST_DATA) / "tiny.aff";
    const auto built = built_tiny();
    if (regenerate()) write_all(committed, built);
    REQUIRE(fs::exists(committed));
    CHECK(read_all(committed) == built);
}

TEST_CASE("every damaged fixture matches its recipe and fails with its exact message", "[container][corrupt]") {
    const auto tiny = built_tiny();
    const aff::Container good = aff::Container::open_bytes(tiny, "tiny.aff");
    for (const aff::test::BadFixture& bad : aff::test::bad_fixtures()) {
        INFO(bad.name);
        auto bytes = tiny;
        bad.damage(bytes, good);
        const fs::path path = fs::path(AFF_TEST_DATA) / "bad" / bad.name;
        if (regenerate()) write_all(path, bytes);
        REQUIRE(fs::exists(path));
        CHECK(read_all(path) == bytes);
        const std::string expected = path.string() + ": " + bad.message;
        if (bad.on_open) {
            CHECK_THROWS_WITH(aff::Container::open(path.string()), expected);
        } else {
            const aff::Container c = aff::Container::open(path.string());
            aff::ThreadPool pool(2);
            try {
                aff::verify_tensor_digests(c, pool, aff::null_progress());
                FAIL("digest check passed on " << bad.name);
            } catch (const aff::Error& e) {
                CHECK(std::string(e.what()).rfind(expected + " (directory ", 0) == 0);
            }
        }
    }
}
