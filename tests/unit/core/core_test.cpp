// Tests for libaff/core: errors, sizes, hashing, atomic files, the thread pool.
#include "libaff/core/atomic_file.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/host_memory.hpp"
#include "libaff/core/mapped_file.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/core/units.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {
fs::path temp_dir() {
    fs::path dir = fs::temp_directory_path() / ("aff-core-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir;
}
}  // namespace

TEST_CASE("an error prints path, context from general to specific, then the message", "[core]") {
    aff::Error e(aff::ErrorKind::format, "offset not aligned to 4096", "model.aff");
    e.add_context("expert 17");
    e.add_context("layer 3");
    CHECK(std::string(e.what()) == "model.aff: layer 3: expert 17: offset not aligned to 4096");
    CHECK(e.kind() == aff::ErrorKind::format);
}

TEST_CASE("with_context prepends to an escaping error", "[core]") {
    try {
        aff::with_context("tensor embed.weight", [] { aff::throw_format("bad shape", "x.aff"); });
        FAIL("no exception");
    } catch (const aff::Error& e) {
        CHECK(std::string(e.what()) == "x.aff: tensor embed.weight: bad shape");
    }
}

TEST_CASE("sizes parse with decimal and binary units", "[core]") {
    CHECK(aff::parse_size("1000") == 1000);
    CHECK(aff::parse_size("48GiB") == 48ull << 30);
    CHECK(aff::parse_size("48gib") == 48ull << 30);
    CHECK(aff::parse_size("50G") == 50'000'000'000ull);
    CHECK(aff::parse_size("50GB") == 50'000'000'000ull);
    CHECK(aff::parse_size("4k") == 4000);
    CHECK(aff::parse_size("4KiB") == 4096);
    CHECK_THROWS_WITH(aff::parse_size("12XB"), Catch::Contains("unknown unit"));
    CHECK_THROWS_WITH(aff::parse_size("0"), Catch::Contains("greater than zero"));
    CHECK_THROWS_WITH(aff::parse_size(""), Catch::Contains("invalid size"));
    CHECK_THROWS_WITH(aff::parse_size("99999999999999999999"), Catch::Contains("too large"));
    CHECK_THROWS_WITH(aff::parse_size("20000000TiB"), Catch::Contains("too large"));
}

TEST_CASE("bytes and durations format for people", "[core]") {
    CHECK(aff::format_bytes(512) == "512 B");
    CHECK(aff::format_bytes(3ull << 29) == "1.50 GiB");
    CHECK(aff::format_duration(3723) == "1:02:03");
    CHECK(aff::format_duration(65) == "1:05");
}

TEST_CASE("SHA-256 and XXH3 give their published values", "[core]") {
    const std::string abc = "abc";
    CHECK(aff::to_hex(aff::sha256(abc.data(), abc.size())) ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(aff::to_hex(aff::sha256("", 0)) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    // XXH3_64bits of the empty input, from the xxHash reference.
    CHECK(aff::xxh3_64("", 0) == 0x2D06800538D394C2ull);
    aff::Xxh3Stream s;
    s.update("ab", 2);
    s.update("c", 1);
    CHECK(s.digest() == aff::xxh3_64("abc", 3));
    std::array<std::uint8_t, 2> out{};
    CHECK(aff::from_hex("aB01", out));
    CHECK(out[0] == 0xab);
    CHECK(out[1] == 0x01);
    CHECK_FALSE(aff::from_hex("zz01", out));
    CHECK_FALSE(aff::from_hex("ab0", out));
}

TEST_CASE("an atomic file appears under its name only on commit", "[core]") {
    const fs::path dir = temp_dir();
    const std::string target = (dir / "out.bin").string();
    {
        aff::AtomicFile f(target);
        f.write("hello", 5);
        f.pad_to(8);
        CHECK(f.offset() == 8);
        f.write_at(0, "J", 1);
        CHECK_FALSE(fs::exists(target));
        CHECK(fs::exists(f.temp_path()));
        f.commit();
    }
    aff::MappedFile m(target);
    REQUIRE(m.size() == 8);
    CHECK(std::string(reinterpret_cast<const char*>(m.data()), 5) == "Jello");
    CHECK(m.data()[7] == 0);

    {
        aff::AtomicFile g((dir / "abandoned.bin").string());
        g.write("x", 1);
    }
    // Nothing of the abandoned file is left: only the committed one is there.
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
    CHECK(entries == 1);
    CHECK_FALSE(fs::exists(dir / "abandoned.bin"));
    fs::remove_all(dir);
}

TEST_CASE("mapping a missing file names it", "[core]") {
    CHECK_THROWS_WITH(aff::MappedFile("/nonexistent/aff/file"), Catch::StartsWith("/nonexistent/aff/file: cannot open"));
}

TEST_CASE("parallel_for covers every index exactly once and rethrows", "[core]") {
    aff::ThreadPool pool(4);
    std::vector<std::atomic<int>> hits(1000);
    pool.parallel_for(hits.size(), [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) hits[i]++;
    });
    for (auto& h : hits) CHECK(h.load() == 1);
    CHECK_THROWS_WITH(pool.parallel_for(100, [](std::size_t b, std::size_t) {
                          if (b > 0) aff::throw_internal("boom");
                      }),
                      Catch::Contains("boom"));
    // The pool stays usable after an exception.
    std::atomic<int> sum{0};
    pool.parallel_for(10, [&](std::size_t b, std::size_t e) { sum += static_cast<int>(e - b); });
    CHECK(sum == 10);
}

TEST_CASE("MemAvailable is read from /proc/meminfo's text", "[core]") {
    CHECK(aff::parse_mem_available("MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   "
                                   "120000000 kB\nBuffers: 1 kB\n") == std::uint64_t(120000000) * 1024);
    CHECK(aff::parse_mem_available("MemAvailable: 7 kB") == std::uint64_t(7 * 1024));
    CHECK_FALSE(aff::parse_mem_available("MemTotal: 10 kB\n").has_value());
    CHECK_FALSE(aff::parse_mem_available("MemAvailable: lots\n").has_value());
    CHECK_FALSE(aff::parse_mem_available("MemAvailable: 12 MB\n").has_value());
    CHECK_FALSE(aff::parse_mem_available("MemAvailable: 99999999999999999999999 kB\n").has_value());
    CHECK(aff::host_mem_available() > 0);  // a Linux host has the line
}
