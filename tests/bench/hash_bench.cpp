// Hashing and splitting throughput (issue 2's performance items), on one multi-GB file
// of pseudo-random bytes created in a scratch directory and deleted afterwards:
//   1. aff-verify -c vs GNU sha256sum on the same file, same run, page cache warm
//      (figure: GB/s each; ratio = sha256sum time / aff-verify time, want >= 1);
//   2. XXH3-64 on one core over the memory-mapped file from page cache (want >= 3 GB/s;
//      bound: the same core's plain read bandwidth over the same mapping);
//   3. aff-split reads its input once: bytes read by this process (rchar in
//      /proc/self/io) during split_file, over the file size (want 1.00).
// usage: hash_bench [SIZE_GIB=3] [SCRATCH_DIR=/tmp]; tools are found beside the
// benchmark (build/tools). Prints one "figure / bound / ratio" line per item.
#include "libaff/container/split.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/mapped_file.hpp"
#include "libaff/core/units.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double run(const std::string& cmd) {
    const auto t = Clock::now();
    if (std::system(cmd.c_str()) != 0) {
        std::fprintf(stderr, "hash_bench: command failed: %s\n", cmd.c_str());
        std::exit(1);
    }
    return seconds(t);
}

std::uint64_t rchar() {
    std::ifstream io("/proc/self/io");
    std::string key;
    std::uint64_t v = 0;
    while (io >> key >> v)
        if (key == "rchar:") return v;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t gib = argc > 1 ? std::stoull(argv[1]) : 3;
    const fs::path scratch = fs::path(argc > 2 ? argv[2] : "/tmp") / ("aff-hash-bench-" + std::to_string(::getpid()));
    const fs::path tools = fs::canonical("/proc/self/exe").parent_path().parent_path() / "tools";
    fs::create_directories(scratch);
    const std::string file = (scratch / "big.bin").string();
    const std::uint64_t size = gib << 30;

    {  // pseudo-random bytes, so nothing compresses or dedups below us
        std::vector<std::uint64_t> block(1u << 20);
        std::uint64_t x = 0x9E3779B97F4A7C15ull;
        std::FILE* f = std::fopen(file.c_str(), "wb");
        for (std::uint64_t done = 0; done < size; done += block.size() * 8) {
            for (auto& w : block) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                w = x;
            }
            std::fwrite(block.data(), 8, block.size(), f);
        }
        std::fclose(f);
    }
    const double gb = static_cast<double>(size) / 1e9;
    std::printf("file: %s, %s\n", file.c_str(), aff::format_bytes(size).c_str());
    run("cat '" + file + "' > /dev/null");  // warm the page cache

    // 1. aff-verify -c vs sha256sum, best of 3, alternating.
    const std::string sums = (scratch / "SHA256SUMS").string();
    run("cd '" + scratch.string() + "' && sha256sum big.bin > SHA256SUMS");
    double best_sha = 1e30, best_aff = 1e30;
    for (int i = 0; i < 3; ++i) {
        best_sha = std::min(best_sha, run("sha256sum '" + file + "' > /dev/null"));
        best_aff = std::min(best_aff, run("'" + (tools / "aff-verify").string() + "' -q -c '" + sums + "' > /dev/null"));
    }
    std::printf("sha256: aff-verify -c %.2f GB/s (%.2f s), sha256sum %.2f GB/s (%.2f s); ratio sha256sum/aff-verify time %.2f\n",
                gb / best_aff, best_aff, gb / best_sha, best_sha, best_sha / best_aff);

    // 2. XXH3 on one core vs a plain read of the same mapping.
    const aff::MappedFile map(file);
    double best_x = 1e30, best_read = 1e30;
    std::uint64_t sink = 0;
    for (int i = 0; i < 3; ++i) {
        auto t = Clock::now();
        sink += aff::xxh3_64(map.data(), map.size());
        best_x = std::min(best_x, seconds(t));
        t = Clock::now();
        const auto* w = reinterpret_cast<const std::uint64_t*>(map.data());
        std::uint64_t s = 0;
        for (std::size_t k = 0; k < map.size() / 8; ++k) s += w[k];
        sink += s;
        best_read = std::min(best_read, seconds(t));
    }
    std::printf("xxh3: %.2f GB/s on one core from page cache; bound: plain read of the mapping %.2f GB/s; ratio %.2f (check %llx)\n",
                gb / best_x, gb / best_read, best_read / best_x, static_cast<unsigned long long>(sink & 0xff));

    // 3. aff-split reads once.
    aff::SplitOptions opt;
    opt.max_size = 1ull << 30;
    opt.output_dir = (scratch / "parts").string();
    fs::create_directories(opt.output_dir);
    const std::uint64_t before = rchar();
    const auto t = Clock::now();
    const aff::SplitResult r = aff::split_file(file, opt, aff::null_progress());
    const double split_s = seconds(t);
    const std::uint64_t read = rchar() - before;
    std::printf("split: %zu parts in %.2f s (%.2f GB/s, two SHA-256 a byte + write); bytes read %llu / file %llu = %.4f\n",
                r.parts.size(), split_s, gb / split_s, static_cast<unsigned long long>(read),
                static_cast<unsigned long long>(size), static_cast<double>(read) / static_cast<double>(size));

    fs::remove_all(scratch);
    return 0;
}
