// The small harness of the device tests (tests/gpu/*_test.cpp): each test runs a kernel on
// random data, runs its CPU twin (libaff/gpu/reference) on the same data, and reports one row
// per comparison: normalised MSE against the family's bound (<stem>_max_nmse beside the
// kernel's declaration). Outputs are poisoned with NaN before every launch, so an element the
// kernel never wrote fails the row. main.cpp prints the table; run.sh builds and runs it.
#pragma once

#include "libaff/checkpoint/config.hpp"
#include "libaff/core/error.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/host_copy.hpp"
#include "libaff/placement/policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace aff::gpu::test {

struct Row {
    std::string family;   // kernel stem
    std::string check;    // what was compared, with the shape
    double nmse = 0.0;
    double bound = 0.0;
    bool pass = false;
};

using TestFn = std::function<void(std::vector<Row>&)>;

std::vector<std::pair<std::string, TestFn>>& registry();

struct Register {
    Register(const char* name, TestFn fn) { registry().emplace_back(name, std::move(fn)); }
};

// ‖got − want‖² / ‖want‖²; any NaN (an unwritten, poisoned element) gives infinity.
inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return INFINITY;
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        const double d = static_cast<double>(got[i]) - want[i];
        num += d * d;
        den += static_cast<double>(want[i]) * want[i];
    }
    return den > 0.0 ? num / den : num;
}

// max |got − want| / max |want|: the largest error relative to the output's scale; any
// non-finite element gives infinity.
inline double max_rel(const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return INFINITY;
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    }
    return scale > 0.0 ? diff / scale : diff;
}

inline void add(std::vector<Row>& rows, std::string family, std::string check, double value, double bound) {
    rows.push_back({std::move(family), std::move(check), value, bound, value <= bound});
}

// tests/data: $AFF_TEST_DATA when set (a binary carried to another machine), else the source tree's.
inline std::string test_data() {
    const char* env = std::getenv("AFF_TEST_DATA");
    return env && *env ? env : AFF_TEST_DATA;
}

inline std::mt19937& rng() {
    static std::mt19937 r(std::random_device{}());  // fresh inputs every run (METHOD: no fixed data)
    return r;
}

inline std::vector<float> normal(size_t n, float mean = 0.0f, float stddev = 1.0f) {
    std::normal_distribution<float> d(mean, stddev);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng());
    return v;
}

// n token ids drawn uniformly from the vocabulary (prompts of the forward-level tests).
inline std::vector<std::int32_t> random_tokens(int n, int vocab) {
    std::uniform_int_distribution<int> tok(0, vocab - 1);
    std::vector<std::int32_t> v(n);
    for (auto& t : v) t = tok(rng());
    return v;
}

// Floats whose bits differ (bit-exactness checks; a size mismatch counts as the longer size).
inline long long differing(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return static_cast<long long>(std::max(a.size(), b.size()));
    long long d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += std::memcmp(&a[i], &b[i], 4) != 0;
    return d;
}

// Argmax of the last row of [n, V] logits (greedy steps of the forward-level tests).
inline int argmax_last(const std::vector<float>& v, int V) {
    return static_cast<int>(std::max_element(v.end() - V, v.end()) - (v.end() - V));
}

// 0 when f throws an aff::Error of kind usage, 1 otherwise (a refusal row's value).
inline double usage_error(const std::function<void()>& f) {
    try {
        f();
    } catch (const aff::Error& e) {
        return e.kind() == aff::ErrorKind::usage ? 0.0 : 1.0;
    }
    return 1.0;
}

// Bytes a state at position p uses, from the config alone: ring rows, and per compressor its
// pending windows, previous windows (CSA) and entries. regions counts the stretches summed.
inline std::size_t state_bytes_used(const aff::ModelConfig& c, std::int64_t p, int& regions) {
    std::size_t bytes = 0;
    regions = 0;
    for (int l = 0; l < c.num_layers; ++l) {
        bytes += std::size_t(std::min<std::int64_t>(p, c.sliding_window)) * c.head_dim * 4;
        ++regions;
        const aff::AttentionKind kind = c.attention[l];
        if (kind == aff::AttentionKind::sliding) continue;
        const std::size_t r = c.compress_ratio[l];
        auto comp = [&](std::size_t dim, bool overlap) {
            const std::size_t width = overlap ? 2 * dim : dim;
            bytes += 2 * r * width * 4 + (overlap ? 2 * r * dim * 4 : 0) + std::size_t(p) / r * dim * 4;
            regions += overlap ? 5 : 3;
        };
        comp(c.head_dim, kind == aff::AttentionKind::csa);
        if (kind == aff::AttentionKind::csa) comp(c.index_head_dim, true);
    }
    return bytes;
}

// The heat mover's knobs for the tier tests' heat cases (tiers_test.cpp, ssd_tier_test.cpp; the
// device scripts' eager_flags, device_script.bash): replay's eager ones (HeatOptions{}), not the
// GPU mover's reluctant defaults (GpuTierOptions::heat): on these random models' near-uniform
// routing the defaults rightly move nothing, and the moving path is what the heat rows test.
inline aff::placement::HeatOptions eager_heat() { return aff::placement::HeatOptions{}; }

// The host/device copies shared with aff-gpucheck (aff/gpu/host_copy.hpp).
using aff::gpu::poisoned;
using aff::gpu::to_device;
using aff::gpu::to_host;

}  // namespace aff::gpu::test

#define AFF_DEVICE_TEST_CAT2(a, b) a##b
#define AFF_DEVICE_TEST_CAT(a, b) AFF_DEVICE_TEST_CAT2(a, b)
#define AFF_DEVICE_TEST(name)                                                                             \
    static void AFF_DEVICE_TEST_CAT(device_test_, __LINE__)(std::vector<aff::gpu::test::Row>&);           \
    static aff::gpu::test::Register AFF_DEVICE_TEST_CAT(device_test_reg_, __LINE__)(                      \
        name, AFF_DEVICE_TEST_CAT(device_test_, __LINE__));                                               \
    static void AFF_DEVICE_TEST_CAT(device_test_, __LINE__)(std::vector<aff::gpu::test::Row> & rows)
