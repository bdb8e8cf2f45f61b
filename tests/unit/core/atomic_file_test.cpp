// Tests for libaff/core/atomic_file's defences: nothing planted at a temporary's name is
// written through, special files at the final name are refused rather than replaced,
// a symlink there is replaced and its target left alone, and a set of files commits
// as a whole or not at all.
#include "libaff/core/atomic_file.hpp"
#include "libaff/core/error.hpp"
#include "unit/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST_CASE("a symlink planted at the old predictable temporary name is not written through", "[core]") {
    aff::test::TempDir dir;
    const std::string victim = dir / "victim", target = dir / "out.bin";
    spit(victim, "precious");
    // The name the writer used to take: "<target>.tmp-<pid>".
    fs::create_symlink(victim, target + ".tmp-" + std::to_string(::getpid()));
    aff::write_file_atomically(target, std::span(reinterpret_cast<const std::uint8_t*>("new"), 3));
    CHECK(slurp(victim) == "precious");
    CHECK(slurp(target) == "new");
    CHECK_FALSE(fs::is_symlink(target));
}

TEST_CASE("temporary names cannot be guessed: two writers of one target never share one", "[core]") {
    aff::test::TempDir dir;
    aff::AtomicFile a(dir / "out.bin"), b(dir / "out.bin");
    CHECK(a.temp_path() != b.temp_path());
    CHECK(a.temp_path().find(std::to_string(::getpid())) == std::string::npos);
    // An unnamed temporary leaves no entry in the folder until commit.
    a.write("a", 1);
    b.write("b", 1);
    std::size_t named = 0;
    for (const auto& e : fs::directory_iterator(dir.path)) named += e.path().filename().string().find(".tmp-") != std::string::npos;
    const bool unnamed = a.temp_path().rfind("/proc/self/fd/", 0) == 0;  // O_TMPFILE; else random names
    CHECK(named == (unnamed ? 0u : 2u));
    b.commit();
    a.commit();
    CHECK(slurp(dir / "out.bin") == "a");
    CHECK(dir.entries() == 1);
}

TEST_CASE("a FIFO, a device node or a directory at the output path is refused, not replaced", "[core]") {
    aff::test::TempDir dir;
    const std::string fifo = dir / "pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(aff::AtomicFile(fifo), Catch::Contains("is a FIFO; outputs are written only to regular files"));
    CHECK(fs::is_fifo(fifo));
    CHECK_THROWS_WITH(aff::check_output_path("/dev/null"), Catch::Contains("/dev/null: is a character device"));
    CHECK(fs::is_character_file("/dev/null"));
    fs::create_directory(dir / "sub");
    CHECK_THROWS_WITH(aff::AtomicFile(dir / "sub"), Catch::Contains("is a directory"));
    CHECK_NOTHROW(aff::check_output_path(dir / "absent"));
}

TEST_CASE("a symlink at the output path is replaced by the file; its target is untouched", "[core]") {
    aff::test::TempDir dir;
    const std::string victim = dir / "victim", link = dir / "out.bin";
    spit(victim, "precious");
    fs::create_symlink(victim, link);
    aff::write_file_atomically(link, std::span(reinterpret_cast<const std::uint8_t*>("new"), 3));
    CHECK(slurp(victim) == "precious");
    CHECK_FALSE(fs::is_symlink(link));
    CHECK(slurp(link) == "new");
}

TEST_CASE("commit_together takes back the files already committed when one fails", "[core]") {
    aff::test::TempDir dir;
    aff::AtomicFile first(dir / "one"), second(dir / "two");
    first.write("1", 1);
    second.write("2", 1);
    // Something takes the second name while they are written.
    fs::create_directory(dir / "two");
    std::vector<aff::AtomicFile*> set{&first, &second};
    CHECK_THROWS_WITH(aff::commit_together(set), Catch::Contains("two"));
    CHECK_FALSE(fs::exists(dir / "one"));
    CHECK(fs::is_directory(dir / "two"));
}

TEST_CASE("commit_together commits every file", "[core]") {
    aff::test::TempDir dir;
    aff::AtomicFile first(dir / "one"), second(dir / "two");
    first.write("1", 1);
    second.write("2", 1);
    std::vector<aff::AtomicFile*> set{&first, &second};
    aff::commit_together(set);
    CHECK(slurp(dir / "one") == "1");
    CHECK(slurp(dir / "two") == "2");
    CHECK(dir.entries() == 2);
}
