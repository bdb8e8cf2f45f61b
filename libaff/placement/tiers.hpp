// The memory tiers an expert can live in and the initial placement: GPU slab, pinned host
// pool, SSD (the container's memory map, which holds every expert). Tiers are exclusive: an
// expert occupies a slot in exactly one of GPU and host, or neither (SSD only). Capacities
// are bytes turned into slots of one expert's size; the placement engine (engine.hpp)
// moves experts between them. Pure logic: no device headers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace aff::placement {

enum class Tier : std::uint8_t { gpu = 0, host = 1, ssd = 2 };
const char* to_string(Tier tier);

// Experts are numbered layer-major: key = layer · experts + expert.
using ExpertKey = std::uint32_t;

struct Geometry {
    std::uint32_t layers = 0, experts = 0;
    std::uint64_t expert_bytes = 0;  // one routed expert as stored (all experts are the same size)
    std::vector<bool> hash_layers;   // routed by token id: known before the step

    std::uint32_t keys() const { return layers * experts; }
    ExpertKey key(std::uint32_t layer, std::uint32_t expert) const { return layer * experts + expert; }
    std::uint32_t layer_of(ExpertKey k) const { return k / experts; }
};

struct Capacity {
    std::uint64_t gpu_bytes = 0, host_bytes = 0;
};

struct Slots {
    std::uint32_t gpu = 0, host = 0;
};
// Whole experts that fit, capped at the number of experts (the GPU first, the host holds
// what the GPU does not). Throws aff::Error (usage) when expert_bytes is 0.
Slots slots_for(const Geometry& geometry, const Capacity& capacity);

// The keys in placement order: busiest first by `counts` (layer-major, geometry.keys()
// entries; empty: no profile), ties by lower key. The first slots.gpu go to the GPU, the
// next slots.host to the host pool.
std::vector<ExpertKey> profile_order(const Geometry& geometry, std::span<const std::uint64_t> counts);
std::vector<Tier> initial_tiers(const Geometry& geometry, const Slots& slots, std::span<const ExpertKey> order);

}  // namespace aff::placement
