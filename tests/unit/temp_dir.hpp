// A scratch directory for unit tests that write files, removed with everything in it
// when the test ends. Unique per process and per instance, so ctest may run test
// processes side by side.
#pragma once

#include <cstddef>
#include <filesystem>
#include <iterator>
#include <string>
#include <unistd.h>

namespace aff::test {

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        static int n = 0;
        path = std::filesystem::temp_directory_path() /
               ("aff-unit-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string operator/(const std::string& name) const { return (path / name).string(); }
    std::size_t entries() const {
        return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(path), {}));
    }
};

}  // namespace aff::test
