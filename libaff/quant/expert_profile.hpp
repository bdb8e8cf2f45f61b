// Expert-popularity profiles (formats/expert-profile.md): how often each routed expert
// of each layer was activated. Made from an imatrix's per-expert counts here (route
// traces come with the placement work); stored as a small standalone file or as the
// container's "profile" section (same bytes), and read to place hot experts first.
#pragma once

#include "libaff/quant/imatrix.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aff::quant {

enum class ProfileSource : std::uint32_t { unknown = 0, imatrix = 1, route_trace = 2 };

struct ExpertProfile {
    std::uint32_t layers = 0, experts = 0;
    ProfileSource source = ProfileSource::unknown;
    std::vector<std::uint64_t> counts;  // layers × experts, layer-major

    std::uint64_t count(std::uint32_t layer, std::uint32_t expert) const { return counts[layer * experts + expert]; }

    std::vector<std::uint8_t> serialize() const;
    // `what` names the file or section in errors.
    static ExpertProfile parse(std::span<const std::uint8_t> bytes, const std::string& what);
    static ExpertProfile read_file(const std::string& path);
    void write_file(const std::string& path) const;
};

struct ProfileFromImatrixReport {
    std::vector<std::string> unmatched;  // imatrix tensors that name no DeepSeek-V4 matrix (warn)
    std::size_t other_tensors = 0;       // DeepSeek-V4 matrices that are no routed experts (skipped)
    std::vector<int> ignored_layers;     // expert tensors of blocks >= max_layers (MTP or cut off)
};

// Per-(layer, expert) activation counts from the imatrix's routed-expert tensors
// (gate/up preferred; down when a layer has only that). max_layers = 0: every layer
// present; otherwise the checkpoint's trunk layers, so llama.cpp's MTP block
// (blk.{max_layers}) is ignored rather than counted as a layer. A legacy .dat imatrix has no per-expert counts: a format error says so.
ExpertProfile profile_from_imatrix(const Imatrix& imatrix, std::uint32_t max_layers, ProfileFromImatrixReport* report);

// Per-layer summary used by aff-profile's text and JSON output.
struct LayerSummary {
    std::uint32_t layer = 0;
    std::uint64_t activations = 0;
    std::uint32_t used = 0;                 // experts with a non-zero count
    std::uint32_t for_half = 0, for_80 = 0;  // fewest experts covering 50 % / 80 % of activations
    double top_share = 0;                    // share of the busiest expert
};
std::vector<LayerSummary> summarize(const ExpertProfile& profile);

struct RankedExpert {
    std::uint32_t layer = 0, expert = 0;
    std::uint64_t count = 0;
    double share = 0;  // of its layer's activations
};
// The n busiest experts of each layer (ties: lower expert id first).
std::vector<RankedExpert> top_experts(const ExpertProfile& profile, std::uint32_t n);

// What aff-profile prints (formats/expert-profile.md §5): a header line, one line per
// layer, then the `top` busiest experts of each layer; or the same as one JSON object.
void write_profile_text(std::ostream& out, const ExpertProfile& profile, std::uint32_t top);
nlohmann::json profile_json(const ExpertProfile& profile, std::uint32_t top);
std::string_view to_string(ProfileSource source);

}  // namespace aff::quant
