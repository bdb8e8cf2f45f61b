// Replays a route trace through the placement engine (libaff/placement/engine.hpp) with
// the engine's own policies: for each GPU capacity and each policy, the hit rate per tier,
// the bytes moved and the modelled time per token. The dispatches are the trace's layer
// blocks in order (one per layer per step), each reduced to its distinct experts and the
// tokens that chose them; Belady's MIN gets each access's next use from the same list.
#pragma once

#include "libaff/placement/engine.hpp"
#include "libaff/placement/policy.hpp"
#include "libaff/trace/route_trace.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace aff::trace {

// Link and memory bandwidths in GB/s (10^9 bytes a second). The defaults are the H200
// machine's measured figures (shared docs, anchors.md): HBM read 4478, pinned host to
// device 55.4; the SSD figure (7, a PCIe 4 NVMe drive) is an assumption, not a measurement.
struct Bandwidths {
    double hbm_gbps = 4478, pcie_gbps = 55.4, ssd_gbps = 7.0;
};

struct ReplayOptions {
    std::vector<std::uint64_t> gpu_bytes;  // one replay per capacity
    std::uint64_t host_bytes = 0;
    std::vector<std::string> policies;     // names of libaff/placement/policy.hpp
    placement::HeatOptions heat;
    Bandwidths bandwidths;
    std::uint64_t expert_bytes = 0;        // 0: the trace header's
    std::vector<std::uint64_t> profile;    // initial placement counts, layers × experts; empty: key order
};

struct ReplayResult {
    std::string policy;
    std::uint64_t gpu_bytes = 0, host_bytes = 0;
    placement::Slots slots;
    placement::Counters counters;
    std::uint64_t token_steps = 0;
    double gpu_hit_rate() const;   // GPU hits / distinct-expert accesses
    double host_hit_rate() const;  // host hits / accesses
    double ssd_rate() const;
    double pcie_bytes_per_token() const;
    double ssd_bytes_per_token() const;
    // Modelled seconds a token: every byte through its link at the link's bandwidth, the
    // links used one after another (no overlap: an upper bound on the engine's time).
    double seconds_per_token(const Bandwidths& bw) const;
};

// The distinct-expert dispatches of a trace, flattened.
struct DispatchList {
    placement::Geometry geometry;
    std::vector<std::uint64_t> begin;      // [dispatches + 1] into keys/tokens
    std::vector<std::uint64_t> step;       // [dispatches]
    std::vector<std::uint32_t> layer;      // [dispatches]
    std::vector<placement::ExpertKey> keys;
    std::vector<std::uint32_t> tokens;
    std::vector<std::uint64_t> next_use;   // per access: the key's next dispatch, or kNever
    std::vector<std::uint64_t> first_use;  // per key
    std::uint64_t token_steps = 0;
    std::size_t size() const { return step.size(); }
};
DispatchList dispatches_of(const RouteTrace& trace, std::uint64_t expert_bytes);

// One result per (capacity, policy), capacities outermost. Throws aff::Error (usage) for an
// unknown policy, a profile of another geometry or an unknown expert size.
std::vector<ReplayResult> replay(const RouteTrace& trace, const ReplayOptions& options);
// The same over a prepared list (benchmarks replay one list many times).
ReplayResult replay_one(const DispatchList& list, std::uint64_t gpu_bytes, std::uint64_t host_bytes,
                        const std::string& policy, const ReplayOptions& options);

void write_replay_text(std::ostream& out, const std::vector<ReplayResult>& results, const Bandwidths& bw);
nlohmann::json replay_json(const std::vector<ReplayResult>& results, const Bandwidths& bw);
// An SVG (opens in any browser) of GPU hit rate against GPU capacity, one line per policy.
std::string hit_rate_svg(const std::vector<ReplayResult>& results, const std::string& title);
// The same curve as a PNG (8-bit RGB, 720 x 440), where libpng was found at configure time:
// hit_rate_png_available() says so; without it hit_rate_png throws aff::Error (usage).
bool hit_rate_png_available();
std::vector<std::uint8_t> hit_rate_png(const std::vector<ReplayResult>& results, const std::string& title);
// Where the PNG goes beside an SVG: its path with ".svg" replaced by ".png", else ".png" added.
std::string png_beside(const std::string& svg_path);

}  // namespace aff::trace
