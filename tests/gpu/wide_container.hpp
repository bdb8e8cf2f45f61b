// The codebook-stored model the device tests use where moe_gemv must take the experts: a
// random checkpoint whose expert shapes it takes (hidden and expert width 1024, 4 experts, top
// 2, 3 layers: sliding, CSA, HCA) with FP8 dense linears and BF16 experts, written from a fixed
// seed and quantised by aff-quantize's library call (container_forward_test.cpp compares it
// with the CPU, expert_table_test.cpp moves its experts). A temporary folder holds the files.
// Also the small containers of V4-Flash's real geometry that the tier and MTP tests write
// (write_v4_geometry: make_geometry_container's library call, one place for its options).
#pragma once

#include "libaff/quant/quantize_model.hpp"
#include "../common/random_v4_checkpoint.hpp"

#include <filesystem>
#include <functional>
#include <string>

namespace aff {
class ThreadPool;
}

namespace aff::gpu::test {

aff::test::V4Geometry wide_geometry();

// Writes the random checkpoint into dir (dense linears FP8); returns how many linears are FP8.
int write_wide_checkpoint(const std::string& dir);

// aff-quantize's library call on the checkpoint in src, to out, with a fixed creation date.
void quantize_checkpoint_to(const std::string& src, const std::string& out, aff::quant::Rotation rotation,
                            aff::ThreadPool& pool);

struct TempDir;
// Writes the wide checkpoint under tmp and quantises it as TQ2875, then as TQ2875R, calling
// f("wide TQ2875" or "wide TQ2875R", the container's path) on each.
void for_each_wide_container(const TempDir& tmp, aff::ThreadPool& pool,
                             const std::function<void(const std::string&, const std::string&)>& f);

// Writes tmp/name: a container of V4-Flash's geometry with `layers` layers of `experts` experts,
// a 4096-token vocabulary and, with mtp, an MTP layer; returns its path.
std::string write_v4_geometry(const TempDir& tmp, const std::string& name, int layers, int experts, bool mtp,
                              aff::ThreadPool& pool);

// A folder under the system's temporary directory, removed with everything in it.
struct TempDir {
    explicit TempDir(const std::string& tag);
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string operator/(const std::string& name) const { return (path / name).string(); }
    std::filesystem::path path;
};

}  // namespace aff::gpu::test
