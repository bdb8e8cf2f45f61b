// Tests for ExtentReader (the SSD tier's reader, libaff/container/extent_reader.hpp) on real files
// on the disk: every expert extent of the embedded default model's container read with O_DIRECT
// equals the mapped bytes; many reads in flight at once all land; an extent cut short by the end of
// the file, a misaligned offset or buffer, and a missing file give one clear error each.
#include "../temp_dir.hpp"

#include "libaff/container/container.hpp"
#include "libaff/container/extent_reader.hpp"
#include "libaff/core/error.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <functional>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

struct AlignedBuffer {
    void* p = nullptr;
    explicit AlignedBuffer(std::size_t n) {
        if (posix_memalign(&p, aff::ExtentReader::kAlign, n) != 0) p = nullptr;
        REQUIRE(p);
        std::memset(p, 0xEE, n);
    }
    ~AlignedBuffer() { std::free(p); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
};

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const aff::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("every expert extent of a container reads back byte for byte", "[container]") {
    const std::string path = std::string(AFF_TEST_DATA) + "/models/tiny-trained.aff";
    const aff::Container c = aff::Container::open(path);
    REQUIRE(c.experts().size() == 64);
    aff::ExtentReader reader(path, 3);
    std::vector<std::unique_ptr<AlignedBuffer>> buffers;
    std::vector<std::uint64_t> tickets;
    for (const aff::ExpertExtent& e : c.experts()) {  // all in flight at once
        buffers.push_back(std::make_unique<AlignedBuffer>(aff::ExtentReader::staging_bytes(e.size)));
        tickets.push_back(reader.submit(e.offset, e.size, buffers.back()->p));
    }
    for (std::size_t i = 0; i < tickets.size(); ++i) {
        reader.wait(tickets[i]);
        const auto want = c.bytes(c.experts()[i]);
        CHECK(std::memcmp(buffers[i]->p, want.data(), want.size()) == 0);
    }
    const aff::ExtentReader::Stats s = reader.stats();
    CHECK(s.reads == 64);
    std::uint64_t total = 0;
    for (const aff::ExpertExtent& e : c.experts()) total += e.size;
    CHECK(s.bytes == total);
}

TEST_CASE("an extent that the end of the file cuts short is an error naming file and offset", "[container]") {
    aff::test::TempDir dir;
    const std::string path = dir / "short.bin";
    {
        std::ofstream f(path, std::ios::binary);
        std::vector<char> bytes(3 * 4096 + 100);
        for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 131 + 7);
        f.write(bytes.data(), std::streamsize(bytes.size()));
    }
    aff::ExtentReader reader(path, 2);
    AlignedBuffer buf(2 * 4096);
    // The last extent ends exactly at the end of the file, inside a block: fine.
    reader.read(2 * 4096, 4096 + 100, buf.p);
    CHECK(static_cast<unsigned char*>(buf.p)[4096 + 99] == static_cast<unsigned char>((2 * 4096 + 4096 + 99) * 131 + 7));
    // One byte more than the file holds.
    const std::string m = message_of([&] { reader.read(2 * 4096, 4096 + 101, buf.p); });
    CHECK(m.find("short.bin") != std::string::npos);
    CHECK(m.find("offset 8192") != std::string::npos);
    CHECK(m.find("gave 4196 bytes") != std::string::npos);
    // The reader keeps working after a failed read.
    reader.read(0, 4096, buf.p);
    CHECK(static_cast<unsigned char*>(buf.p)[1] == static_cast<unsigned char>(131 + 7));
}

TEST_CASE("misaligned offsets and buffers and missing files are refused", "[container]") {
    aff::test::TempDir dir;
    const std::string path = dir / "f.bin";
    std::ofstream(path, std::ios::binary) << std::string(8192, 'x');
    aff::ExtentReader reader(path, 1);
    AlignedBuffer buf(8192);
    CHECK(message_of([&] { reader.submit(100, 10, buf.p); }).find("not a multiple of 4096") != std::string::npos);
    CHECK(message_of([&] { reader.submit(0, 10, static_cast<char*>(buf.p) + 1); }).find("not 4096-byte aligned") !=
          std::string::npos);
    CHECK(message_of([&] { aff::ExtentReader missing(dir / "absent.bin"); }).find("absent.bin") != std::string::npos);
}
