// Tests for ExtentReader (the SSD tier's reader, libaff/container/extent_reader.hpp) on real files
// on the disk: every expert extent of the embedded default model's container read with O_DIRECT
// equals the mapped bytes; many reads in flight at once all land; an extent cut short by the end of
// the file, a misaligned offset or buffer, and a missing file give one clear error each. O_DIRECT
// on the real disk (the test's temporary folder: direct() must hold there when its filesystem is
// one known to take O_DIRECT) and on /dev/shm, and the fallback to buffered reads when the open
// with O_DIRECT is refused (EINVAL, simulated: tmpfs takes O_DIRECT since Linux 6.6), all read
// extents of odd sizes (their last block partly past the extent) byte for byte.
#include "../temp_dir.hpp"

#include "libaff/container/container.hpp"
#include "libaff/container/extent_reader.hpp"
#include "libaff/core/error.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <linux/magic.h>
#include <sys/vfs.h>
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

namespace {

// A file of pseudo-random bytes and, in it, extents at multiples of 4096 of sizes that are not.
struct ExtentFile {
    std::vector<unsigned char> bytes;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> extents;  // offset, size
    explicit ExtentFile(const std::string& path) {
        bytes.resize(40 * 4096 + 1234);
        std::uint32_t x = 12345;
        for (unsigned char& b : bytes) b = static_cast<unsigned char>((x = x * 1664525u + 1013904223u) >> 24);
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        extents = {{0, 4096}, {4096, 1}, {2 * 4096, 3 * 4096 + 17}, {8 * 4096, 9000}, {12 * 4096, 20 * 4096},
                   {39 * 4096, 4096 + 1234}};  // the last ends at the end of the file
    }
    // Every extent read at once into buffers of staging_bytes; each must equal the file's bytes.
    int mismatches(aff::ExtentReader& r) const {
        std::vector<std::unique_ptr<AlignedBuffer>> bufs;
        std::vector<std::uint64_t> tickets;
        for (const auto& [offset, size] : extents) {
            bufs.push_back(std::make_unique<AlignedBuffer>(aff::ExtentReader::staging_bytes(size)));
            tickets.push_back(r.submit(offset, size, bufs.back()->p));
        }
        int bad = 0;
        for (std::size_t i = 0; i < extents.size(); ++i) {
            r.wait(tickets[i]);
            bad += std::memcmp(bufs[i]->p, bytes.data() + extents[i].first, extents[i].second) != 0;
        }
        return bad;
    }
};

bool takes_o_direct(const std::string& dir) {  // filesystems known to take O_DIRECT
    struct statfs fs {};
    if (statfs(dir.c_str(), &fs) != 0) return false;
    const auto magic = static_cast<unsigned long>(fs.f_type);
    return magic == EXT4_SUPER_MAGIC || magic == XFS_SUPER_MAGIC || magic == BTRFS_SUPER_MAGIC;
}

int refuse_direct(const char* path, int flags) {
    if (flags & O_DIRECT) {
        errno = EINVAL;
        return -1;
    }
    return aff::ExtentReader::open_file(path, flags);
}

int missing_always(const char*, int) {
    errno = ENOENT;
    return -1;
}

}  // namespace

TEST_CASE("O_DIRECT reads on the disk of extents of odd sizes", "[container]") {
    aff::test::TempDir dir;
    const std::string path = dir / "extents.bin";
    const ExtentFile f(path);
    aff::ExtentReader direct(path, 3);
    if (takes_o_direct(dir.path.string())) CHECK(direct.direct());
    else WARN("the temporary folder's filesystem is not one known to take O_DIRECT: direct() is " << direct.direct());
    CHECK(f.mismatches(direct) == 0);
    aff::ExtentReader buffered(path, 2, false);
    CHECK_FALSE(buffered.direct());
    CHECK(f.mismatches(buffered) == 0);
    const aff::ExtentReader::Stats s = direct.stats();
    CHECK(s.reads == f.extents.size());
    std::uint64_t total = 0;
    for (const auto& e : f.extents) total += e.second;
    CHECK(s.bytes == total);  // the extents' bytes, not the whole blocks read
}

TEST_CASE("reads on tmpfs, and the fallback when the open with O_DIRECT is refused", "[container]") {
    aff::test::TempDir dir;
    const std::string path = dir / "extents.bin";
    const ExtentFile f(path);
    aff::ExtentReader refused(path, 2, true, refuse_direct);
    CHECK_FALSE(refused.direct());
    CHECK(f.mismatches(refused) == 0);
    // Any other failure of the open is an error naming the file.
    CHECK(message_of([&] { aff::ExtentReader r(path, 1, true, missing_always); }).find("extents.bin") != std::string::npos);
    // /dev/shm (tmpfs): O_DIRECT or not, the bytes are the file's.
    const std::filesystem::path shm = "/dev/shm";
    if (std::filesystem::is_directory(shm)) {
        const std::string p = (shm / ("aff-extent-reader-" + std::to_string(::getpid()))).string();
        {
            const ExtentFile g(p);
            aff::ExtentReader r(p, 2);
            CHECK(g.mismatches(r) == 0);
        }
        std::filesystem::remove(p);
    }
}
