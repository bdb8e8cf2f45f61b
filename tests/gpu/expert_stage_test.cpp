// Device test of the prefill GEMMs' staging of bus-read experts (kernels/expert_stage.hpp) on
// synthetic tables, where the tiers test (tiers_test.cpp) sees it only through bit-identical
// logits. Each expert has random bytes in one of: device memory (HBM, never staged), a pinned
// "pool" buffer (far range 0), a pinned "SSD staging" buffer (far range 1), or no address (an
// SSD expert dropped since its last call), and a job count. The launch's outputs are poisoned
// first (the table and the sources with 0xff, the slots with 0xa5, one entry and one slot past
// the end included) and the counters start at nonzero values. Rows per case, each held to 0:
//   - which experts were staged, in slot order: for the hand-made cases, the list worked out by
//     hand from the contract (far, at least min_jobs jobs, more jobs first then the lower id,
//     while slots last); for every case, the list of the CPU twin below;
//   - every stage_table entry: its slot for a staged expert, else the layer's own entry;
//   - the slot sources: the staged experts' entries, null for the slots left empty, nothing
//     written past slot_count;
//   - the bytes of each staged slot equal its expert's, and nothing else written (the slots'
//     tails past `bytes`, the empty slots, the entry and slot past the end);
//   - the counters added to (staged, in place, in-place tiles, staged tiles of 64 jobs), against
//     the hand-made values and the twin's; a second launch adds them again.
// The hand-made cases are the arguments GpuModel::stage_bus_experts (libaff/gpu/forward_moe.cpp)
// passes in each mode: on, and automatic in calls of kStageEveryFrom tokens or more (min_jobs 1,
// slots); automatic below (min_jobs kMoeGemmTileM + 1: only experts of two tiles or more); off
// (no slot, min_jobs 1: nothing copied, the counters say what on would stage); then fewer slots
// than candidates, the far range's bounds ([lo, hi): the expert at lo far, the one at hi not),
// an empty SSD range, and no bus-read expert at all. Random cases (against the twin): extents of
// several 64 KiB copy blocks and a partial one, ties in the counts, 1024 experts (the limit),
// one expert, null counters; the throttled copy (copy_blocks 1, 3, 8 and more than the 64 KiB
// chunks; 1, 3 and 8 at copy_depth 8; the bulk copy on 1 to 50 blocks, chunks of 4, 8 and
// 16 KiB) over that extent. Refusals: the launcher's argument checks (unsupported errors).
// Then the decode prefetch's priorities and hits kernels (prefetch_kernels says how).
#include "device_test.hpp"

#include "kernels/expert_stage.hpp"
#include "kernels/moe_gemm.hpp"
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace aff::gpu::test;

namespace {

using aff::gpu::kExpertStageCounters;
constexpr int kTile = aff::gpu::kMoeGemmTileM;
constexpr std::uint8_t kSlotPoison = 0xa5;
using Counters = std::array<std::uint32_t, kExpertStageCounters>;  // ExpertStageCounter order
constexpr Counters kStart = {3, 5, 7, 11};                           // the counters before a case

enum class Place { hbm, pool, ssd, none };

struct Case {
    std::string name;
    std::vector<Place> place;
    std::vector<std::int32_t> counts;
    int min_jobs = 1;
    int slots = 0;
    std::size_t bytes = 4096;  // copied an expert (a multiple of 16)
    int pool_from = 0;         // the pool's far range: its experts [pool_from, pool_to) in id order
    int pool_to = -1;          // -1: to its end
    bool ssd_range = true;     // false: range 1 empty (lo = hi = null), as without SSD experts
    bool counters = true;      // false: null counters
    int copy_blocks = 0;       // ExpertStageArgs::copy_blocks (0: one a 64 KiB chunk)
    int copy_depth = 4;        // ExpertStageArgs::copy_depth (loads in flight a thread)
    bool copy_bulk = false;    // ExpertStageArgs::copy_bulk (the TMA's bulk copies, depth chunks in flight)
    int copy_chunk_kib = 16;   // ExpertStageArgs::copy_chunk_kib (their size)
    std::optional<std::vector<int>> want;  // worked out by hand: the staged experts in slot order
    std::optional<Counters> want_counters;  // ... and the counters one launch adds
};

// What the launch must do, from the contract (expert_stage.hpp): the CPU twin.
struct Expected {
    std::vector<int> staged;  // in slot order
    std::vector<std::uintptr_t> table;
    Counters counters{};
};

Expected twin(const std::vector<std::uintptr_t>& table, const std::vector<std::int32_t>& counts,
              const std::uintptr_t lo[2], const std::uintptr_t hi[2], int min_jobs, int slots, std::uintptr_t slot_base,
              std::size_t stride) {
    const int E = int(table.size());
    auto far = [&](std::uintptr_t p) { return p != 0 && ((p >= lo[0] && p < hi[0]) || (p >= lo[1] && p < hi[1])); };
    std::vector<int> candidates;
    for (int e = 0; e < E; ++e)
        if (far(table[e]) && counts[e] >= min_jobs) candidates.push_back(e);
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return counts[a] > counts[b]; });
    Expected x;
    x.table = table;
    for (std::size_t r = 0; r < candidates.size() && int(r) < slots; ++r) x.staged.push_back(candidates[r]);
    std::vector<bool> staged(E, false);
    for (std::size_t r = 0; r < x.staged.size(); ++r) {
        const int e = x.staged[r];
        staged[e] = true;
        x.table[e] = slot_base + r * stride;
    }
    using aff::gpu::kInPlaceExperts, aff::gpu::kInPlaceTiles, aff::gpu::kStagedExperts, aff::gpu::kStagedTiles;
    for (int e = 0; e < E; ++e) {
        const std::uint32_t tiles = std::uint32_t((counts[e] + kTile - 1) / kTile);
        if (staged[e]) {
            ++x.counters[kStagedExperts];
            x.counters[kStagedTiles] += tiles;
        } else if (counts[e] > 0 && far(table[e])) {
            ++x.counters[kInPlaceExperts];
            x.counters[kInPlaceTiles] += tiles;
        }
    }
    return x;
}

// A list of expert ids for a row's name: the first 12, then how many more.
std::string show(const std::vector<int>& v) {
    std::string s = "{";
    for (std::size_t i = 0; i < std::min<std::size_t>(v.size(), 12); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    if (v.size() > 12) s += ",... " + std::to_string(v.size()) + " in all";
    return s + "}";
}

void run_case(const Case& k, std::vector<Row>& rows) {
    const std::string f = "expert_stage", what = k.name;
    const int E = int(k.place.size());
    const std::size_t stride = (k.bytes + 16 + 255) / 256 * 256;  // a tail past `bytes` that must stay untouched
    // Each expert's bytes, and its index in its place's buffer (experts in id order).
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<std::vector<std::uint8_t>> content(E);
    std::vector<int> index(E, 0);
    int in[4] = {0, 0, 0, 0};
    for (int e = 0; e < E; ++e) {
        index[e] = in[int(k.place[e])]++;
        if (k.place[e] == Place::none) continue;
        content[e].resize(k.bytes);
        for (auto& b : content[e]) b = std::uint8_t(byte(rng()));
    }
    auto region = [&](Place p) { return std::max<std::size_t>(std::size_t(in[int(p)]) * stride, 256); };
    aff::gpu::Buffer hbm(region(Place::hbm));
    aff::gpu::PinnedBuffer pool(region(Place::pool)), ssd(region(Place::ssd));
    std::vector<std::uint8_t> hbm_host(hbm.size(), 0);
    for (int e = 0; e < E; ++e) {
        const std::size_t at = std::size_t(index[e]) * stride;
        if (k.place[e] == Place::hbm) std::memcpy(hbm_host.data() + at, content[e].data(), k.bytes);
        if (k.place[e] == Place::pool) std::memcpy(static_cast<std::uint8_t*>(pool.data()) + at, content[e].data(), k.bytes);
        if (k.place[e] == Place::ssd) std::memcpy(static_cast<std::uint8_t*>(ssd.data()) + at, content[e].data(), k.bytes);
    }
    aff::gpu::upload(hbm, hbm_host.data(), hbm_host.size());
    std::vector<std::uintptr_t> table(E, 0);
    for (int e = 0; e < E; ++e) {
        const std::size_t at = std::size_t(index[e]) * stride;
        const Place p = k.place[e];
        table[e] = p == Place::hbm    ? std::uintptr_t(hbm.data()) + at
                   : p == Place::pool ? std::uintptr_t(pool.device_data()) + at
                   : p == Place::ssd  ? std::uintptr_t(ssd.device_data()) + at
                                      : 0;
    }
    const std::uintptr_t pool_base = std::uintptr_t(pool.device_data());
    const std::uintptr_t lo[2] = {pool_base + std::size_t(k.pool_from) * stride,
                                  k.ssd_range ? std::uintptr_t(ssd.device_data()) : 0};
    const std::uintptr_t hi[2] = {pool_base + std::size_t(k.pool_to < 0 ? in[int(Place::pool)] : k.pool_to) * stride,
                                  k.ssd_range ? lo[1] + std::size_t(in[int(Place::ssd)]) * stride : 0};

    // The outputs, poisoned, one entry (and one slot) past the end.
    const int sources = std::max(1, k.slots);
    aff::gpu::Buffer dtable = to_device(table), dcounts = to_device(k.counts);
    aff::gpu::Buffer stage_table = poisoned(std::size_t(E) + 1, sizeof(std::uintptr_t));
    aff::gpu::Buffer slot_source = poisoned(std::size_t(sources) + 1, sizeof(std::uintptr_t));
    aff::gpu::Buffer slots(std::size_t(k.slots + 1) * stride);
    aff::gpu::Buffer counters = to_device(std::vector<std::uint32_t>(kStart.begin(), kStart.end()));
    aff::gpu::Stream s;
    s.fill(slots.data(), kSlotPoison, slots.size());
    s.synchronize();

    aff::gpu::ExpertStageArgs a;
    a.table = dtable.as<const std::uint8_t* const>();
    a.experts = E;
    a.counts = dcounts.as<const std::int32_t>();
    a.min_jobs = k.min_jobs;
    a.tile_jobs = kTile;
    for (int r = 0; r < 2; ++r) {
        a.far_lo[r] = reinterpret_cast<const std::uint8_t*>(lo[r]);
        a.far_hi[r] = reinterpret_cast<const std::uint8_t*>(hi[r]);
    }
    a.slots = slots.as<std::uint8_t>();
    a.slot_stride = stride;
    a.slot_count = k.slots;
    a.bytes = k.bytes;
    a.copy_blocks = k.copy_blocks;
    a.copy_depth = k.copy_depth;
    a.copy_bulk = k.copy_bulk;
    a.copy_chunk_kib = k.copy_chunk_kib;
    a.stage_table = stage_table.as<const std::uint8_t*>();
    a.slot_source = slot_source.as<const std::uint8_t*>();
    a.counters = k.counters ? counters.as<std::uint32_t>() : nullptr;
    aff::gpu::expert_stage(a, s.handle());
    s.synchronize();

    const std::uintptr_t slot_base = std::uintptr_t(slots.data());
    const Expected x = twin(table, k.counts, lo, hi, k.min_jobs, k.slots, slot_base, stride);
    const std::vector<std::uintptr_t> got_table = to_host<std::uintptr_t>(stage_table, std::size_t(E) + 1);
    const std::vector<std::uintptr_t> got_source = to_host<std::uintptr_t>(slot_source, std::size_t(sources) + 1);
    const std::vector<std::uint8_t> got_slots = to_host<std::uint8_t>(slots, slots.size());
    const std::vector<std::uint32_t> got_counters = to_host<std::uint32_t>(counters, kExpertStageCounters);

    // The staged experts in slot order, as the device's table says (an entry into slot r).
    std::vector<int> order(std::size_t(std::max(k.slots, 0)), -1);
    long long odd_entries = 0;  // an entry inside the slots but not at a slot's start, or twice in one
    for (int e = 0; e < E; ++e) {
        const std::uintptr_t p = got_table[e];
        if (p < slot_base || p >= slot_base + std::size_t(k.slots) * stride) continue;
        const std::size_t r = (p - slot_base) / stride;
        if ((p - slot_base) % stride != 0 || order[r] != -1) {
            ++odd_entries;
            continue;
        }
        order[r] = e;
    }
    order.erase(std::find(order.begin(), order.end(), -1), order.end());
    add(rows, f, what + ": staged " + show(order) + " vs the twin's " + show(x.staged) + " (1 = differ)",
        order == x.staged && odd_entries == 0 ? 0.0 : 1.0, 0.0);
    if (k.want)
        add(rows, f, what + ": staged vs worked out by hand " + show(*k.want) + " (1 = differ)", order == *k.want ? 0.0 : 1.0, 0.0);

    long long wrong = 0;
    for (int e = 0; e < E; ++e) wrong += got_table[e] != x.table[e];
    add(rows, f, what + ": stage_table entries wrong", double(wrong), 0.0);

    long long bad_sources = 0;
    for (int r = 0; r < k.slots; ++r)
        bad_sources += got_source[r] != (std::size_t(r) < x.staged.size() ? table[x.staged[r]] : 0);
    add(rows, f, what + ": slot sources wrong (staged experts' entries, then null)", double(bad_sources), 0.0);

    long long bytes_wrong = 0, stray = 0;
    for (std::size_t r = 0; r <= std::size_t(k.slots); ++r) {
        const std::uint8_t* slot = got_slots.data() + r * stride;
        std::size_t from = 0;
        if (r < x.staged.size()) {
            const std::vector<std::uint8_t>& want = content[x.staged[r]];
            for (std::size_t i = 0; i < k.bytes; ++i) bytes_wrong += slot[i] != want[i];
            from = k.bytes;
        }
        for (std::size_t i = from; i < stride; ++i) stray += slot[i] != kSlotPoison;
    }
    // Past the end: the table's extra entry, and the sources from slot_count on (all of them with no slot).
    for (std::size_t i = std::size_t(std::max(k.slots, 0)); i < got_source.size(); ++i) stray += got_source[i] != ~std::uintptr_t(0);
    stray += got_table[std::size_t(E)] != ~std::uintptr_t(0);
    add(rows, f, what + ": bytes of the staged slots differing from their experts' (" + std::to_string(x.staged.size()) + " x " +
                     std::to_string(k.bytes) + ")",
        double(bytes_wrong), 0.0);
    add(rows, f, what + ": bytes or entries written outside the staged extents", double(stray), 0.0);

    long long counter_diff = 0, hand_diff = 0, again_diff = 0;
    for (int c = 0; c < kExpertStageCounters; ++c) {
        const std::uint32_t want = k.counters ? kStart[c] + x.counters[c] : kStart[c];
        counter_diff += std::llabs((long long)got_counters[c] - (long long)want);
        if (k.want_counters) hand_diff += std::llabs((long long)(*k.want_counters)[c] - (long long)x.counters[c]);
    }
    add(rows, f, what + ": counters (staged, in place, tiles in place, tiles staged) " +
                     (k.counters ? "|got - start - twin's|" : "untouched (null counters)"),
        double(counter_diff), 0.0);
    if (k.want_counters)
        add(rows, f, what + ": the twin's counters vs worked out by hand, |difference|", double(hand_diff), 0.0);
    if (k.counters) {  // a second launch adds as much again, and writes the same table
        aff::gpu::expert_stage(a, s.handle());
        s.synchronize();
        const std::vector<std::uint32_t> again = to_host<std::uint32_t>(counters, kExpertStageCounters);
        for (int c = 0; c < kExpertStageCounters; ++c)
            again_diff += std::llabs((long long)again[c] - (long long)(kStart[c] + 2 * x.counters[c]));
        const std::vector<std::uintptr_t> table2 = to_host<std::uintptr_t>(stage_table, std::size_t(E));
        for (int e = 0; e < E; ++e) again_diff += table2[e] != x.table[e];
        add(rows, f, what + ": a second launch: |counters - start - 2 x twin's| + entries changed", double(again_diff), 0.0);
    }
}

// The hand-made table: 14 experts, their places and jobs chosen around the thresholds (1 job,
// 64 = one tile, 65 = two, ties of 65 and 64 across the pool and the SSD).
//   expert   0    1    2    3    4    5    6     7    8    9    10   11   12   13
//   place    hbm  pool pool pool pool ssd  none  ssd  pool hbm  ssd  pool pool ssd
//   jobs     200  3    1    64   65   130  7     65   300  0    1    64   0    0
//   tiles    4    1    1    1    2    3    1     2    5    0    1    1    0    0
// Pool indices (id order): 1:0 2:1 3:2 4:3 8:4 11:5 12:6. Far and routed: 1 2 3 4 5 7 8 10 11
// (9 experts, 17 tiles); by jobs, then id: 8 5 4 7 3 11 1 2 10. Never far: 0 and 9 (HBM), 6 (no
// address), and 12, 13 have no jobs.
std::vector<Case> hand_cases() {
    using P = Place;
    const std::vector<Place> place = {P::hbm, P::pool, P::pool, P::pool, P::pool, P::ssd, P::none,
                                      P::ssd, P::pool, P::hbm,  P::ssd,  P::pool, P::pool, P::ssd};
    const std::vector<std::int32_t> jobs = {200, 3, 1, 64, 65, 130, 7, 65, 300, 0, 1, 64, 0, 0};
    const std::string every = "on (and automatic from " + std::to_string(aff::gpu::kStageEveryFrom) + " tokens)";
    const std::string below = "automatic below " + std::to_string(aff::gpu::kStageEveryFrom) + " tokens";
    std::vector<Case> v;
    auto add_case = [&](std::string name, int min_jobs, int slots, std::vector<int> want, Counters counters) -> Case& {
        Case k;
        k.name = std::move(name);
        k.place = place;
        k.counts = jobs;
        k.min_jobs = min_jobs;
        k.slots = slots;
        k.want = std::move(want);
        k.want_counters = counters;
        v.push_back(std::move(k));
        return v.back();
    };
    // Counters: staged, in place, tiles in place, tiles staged.
    add_case(every + ", 16 slots", 1, 16, {8, 5, 4, 7, 3, 11, 1, 2, 10}, {9, 0, 0, 17});
    add_case(below + " (min " + std::to_string(kTile + 1) + " jobs), 16 slots", kTile + 1, 16, {8, 5, 4, 7}, {4, 5, 5, 12});
    add_case("off (no slot, min 1 job)", 1, 0, {}, {0, 9, 17, 0});
    add_case(every + ", 3 slots (more candidates than slots)", 1, 3, {8, 5, 4}, {3, 6, 7, 10});
    add_case(below + ", 2 slots", kTile + 1, 2, {8, 5}, {2, 7, 9, 8});
    add_case(every + ", 1 slot", 1, 1, {8}, {1, 8, 12, 5});
    // The pool's range from its expert at index 1 (expert 2, at lo: far) to index 5 (expert 11,
    // at hi: not far); expert 1 (index 0) below it. Neither 1 nor 11 is counted.
    add_case(every + ", pool range [index 1, index 5)", 1, 16, {8, 5, 4, 7, 3, 2, 10}, {7, 0, 0, 15}).pool_from = 1;
    v.back().pool_to = 5;
    // No SSD range: the SSD-placed experts (5, 7, 10) are not read over the bus.
    add_case(every + ", empty SSD range", 1, 16, {8, 4, 3, 11, 1, 2}, {6, 0, 0, 11}).ssd_range = false;
    // No bus-read expert: routed experts in HBM or without an address, far ones without jobs.
    {
        Case k;
        k.name = "no bus-read expert (HBM, no address, far with 0 jobs), 8 slots";
        k.place = {P::hbm, P::none, P::pool, P::ssd, P::hbm, P::pool};
        k.counts = {500, 90, 0, 0, 1, 0};
        k.slots = 8;
        k.want = std::vector<int>{};
        k.want_counters = Counters{0, 0, 0, 0};
        v.push_back(std::move(k));
    }
    return v;
}

// Random places and job counts drawn from a few values, so that ties are common.
Case random_case(std::string name, int experts, std::size_t bytes, int min_jobs, int slots, bool counters = true) {
    static const std::int32_t kJobs[] = {0, 0, 1, 2, 63, 64, 65, 128, 129, 300, 1000};
    std::discrete_distribution<int> place({25, 35, 30, 10});  // hbm, pool, ssd, none
    std::uniform_int_distribution<int> jobs(0, int(std::size(kJobs)) - 1);
    Case k;
    k.name = std::move(name);
    for (int e = 0; e < experts; ++e) {
        k.place.push_back(Place(place(rng())));
        k.counts.push_back(kJobs[jobs(rng())]);
    }
    k.bytes = bytes;
    k.min_jobs = min_jobs;
    k.slots = slots;
    k.counters = counters;
    return k;
}

// 0 when f throws an aff::Error of kind unsupported (the launchers' argument refusals), 1 otherwise.
double unsupported(const std::function<void()>& f) {
    try {
        f();
    } catch (const aff::Error& e) {
        return e.kind() == aff::ErrorKind::unsupported ? 0.0 : 1.0;
    }
    return 1.0;
}

void refusals(std::vector<Row>& rows) {
    aff::gpu::Buffer table = poisoned(4, sizeof(void*)), counts = to_device(std::vector<std::int32_t>(4, 1));
    aff::gpu::Buffer out = poisoned(4, sizeof(void*)), sources = poisoned(4, sizeof(void*)), slots(4096);
    aff::gpu::Stream s;
    aff::gpu::ExpertStageArgs ok;
    ok.table = table.as<const std::uint8_t* const>();
    ok.experts = 4;
    ok.counts = counts.as<const std::int32_t>();
    ok.slots = slots.as<std::uint8_t>();
    ok.slot_stride = 1024;
    ok.slot_count = 2;
    ok.bytes = 1024;
    ok.stage_table = out.as<const std::uint8_t*>();
    ok.slot_source = sources.as<const std::uint8_t*>();
    auto refused = [&](const std::string& what, auto change) {
        aff::gpu::ExpertStageArgs a = ok;
        change(a);
        add(rows, "expert_stage", "refused: " + what + " (1 = not unsupported)",
            unsupported([&] { aff::gpu::expert_stage(a, s.handle()); }), 0.0);
    };
    double threw = 0.0;
    try {
        aff::gpu::expert_stage(ok, s.handle());
        s.synchronize();
    } catch (const std::exception&) {
        threw = 1.0;
    }
    add(rows, "expert_stage", "the arguments the refusals below change one by one are accepted (1 = threw)", threw, 0.0);
    refused("0 experts", [](auto& a) { a.experts = 0; });
    refused("1025 experts", [](auto& a) { a.experts = aff::gpu::kExpertStageMaxExperts + 1; });
    refused("null counts", [](auto& a) { a.counts = nullptr; });
    refused("min_jobs 0", [](auto& a) { a.min_jobs = 0; });
    refused("slots null with slot_count 2", [](auto& a) { a.slots = nullptr; });
    refused("bytes not a multiple of 16", [](auto& a) { a.bytes = 1000; });
    refused("bytes over the slot stride", [](auto& a) { a.bytes = 2048; });
    refused("65536 slots", [](auto& a) { a.slot_count = 65536; });
    refused("copy_blocks -1", [](auto& a) { a.copy_blocks = -1; });
    refused("copy_depth 6", [](auto& a) { a.copy_depth = 6; });
    refused("copy_chunk_kib 12", [](auto& a) { a.copy_chunk_kib = 12; });
    s.synchronize();
}

// The decode prefetch's two kernels (expert_stage_priorities, expert_stage_hits). Priorities:
// each case's counts against the contract's sum of top_k − rank over the tokens choosing an
// expert (worked out by hand for two cases, by a host twin for random routings of 1 to 170
// tokens at V4-Flash's 256 experts top 6 and at 1024 experts, ids distinct within a token);
// the output starts poisoned, one entry past the end stays so. Hits: synthetic tables (the
// kernel compares entries, never reads through them) where some entries differ, routed ids
// with repeats; the counter, started at 7, gains the distinct differing experts routed to.
void prefetch_kernels(std::vector<Row>& rows) {
    const std::string f = "expert_stage";
    aff::gpu::Stream s;
    auto priorities = [&](const std::vector<std::int32_t>& ids, int k, int E) {
        aff::gpu::Buffer dids = to_device(ids.empty() ? std::vector<std::int32_t>{0} : ids);
        aff::gpu::Buffer out = poisoned(std::size_t(E) + 1, sizeof(std::int32_t));
        aff::gpu::expert_stage_priorities(dids.as<const std::int32_t>(), int(ids.size()), k, E, out.as<std::int32_t>(),
                                          s.handle());
        s.synchronize();
        return to_host<std::int32_t>(out, std::size_t(E) + 1);
    };
    auto twin_priorities = [](const std::vector<std::int32_t>& ids, int k, int E) {
        std::vector<std::int32_t> c(std::size_t(E), 0);
        for (std::size_t j = 0; j < ids.size(); ++j) c[std::size_t(ids[j])] += k - int(j % std::size_t(k));
        return c;
    };
    auto check = [&](const std::string& what, const std::vector<std::int32_t>& ids, int k, int E,
                     const std::vector<std::int32_t>& want) {
        const std::vector<std::int32_t> got = priorities(ids, k, E);
        long long wrong = 0;
        for (int e = 0; e < E; ++e) wrong += got[std::size_t(e)] != want[std::size_t(e)] ? 1 : 0;
        std::int32_t poison = 0;
        std::memset(&poison, 0xff, sizeof poison);
        add(rows, f, "priorities, " + what + ": counts differing", double(wrong), 0.0);
        add(rows, f, "priorities, " + what + ": entry past the end written", got[std::size_t(E)] != poison ? 1.0 : 0.0, 0.0);
    };
    {
        std::vector<std::int32_t> want(10, 0);
        want[5] = 3, want[3] = 2, want[9] = 1;
        check("one token {5,3,9} of 10 experts top 3 (by hand)", {5, 3, 9}, 3, 10, want);
        want[5] = 5, want[3] = 5, want[1] = 1;
        check("tokens {5,3,9} {3,5,1} (by hand)", {5, 3, 9, 3, 5, 1}, 3, 10, want);
        check("no token", {}, 3, 10, std::vector<std::int32_t>(10, 0));
    }
    for (const auto& [tokens, k, E] : std::vector<std::array<int, 3>>{{1, 6, 256}, {4, 6, 256}, {170, 6, 256}, {3, 16, 1024}, {64, 16, 1024}}) {
        std::vector<std::int32_t> ids;
        for (int t = 0; t < tokens; ++t) {
            std::vector<std::int32_t> all(static_cast<std::size_t>(E));
            for (int e = 0; e < E; ++e) all[std::size_t(e)] = e;
            std::shuffle(all.begin(), all.end(), rng());
            ids.insert(ids.end(), all.begin(), all.begin() + k);
        }
        check("random " + std::to_string(tokens) + " tokens, " + std::to_string(E) + " experts top " + std::to_string(k), ids,
              k, E, twin_priorities(ids, k, E));
    }
    // Hits.
    for (const int E : {16, 256, 1024}) {
        std::vector<std::uintptr_t> table(static_cast<std::size_t>(E)), stage(static_cast<std::size_t>(E));
        std::vector<bool> differs(static_cast<std::size_t>(E));
        for (int e = 0; e < E; ++e) {
            table[std::size_t(e)] = 0x10000 + std::uintptr_t(e) * 4096;
            differs[std::size_t(e)] = (rng()() % 3) == 0;
            stage[std::size_t(e)] = differs[std::size_t(e)] ? 0x900000000ull + std::uintptr_t(e) * 64 : table[std::size_t(e)];
        }
        std::vector<std::int32_t> ids;
        const int jobs = E == 16 ? 24 : 1024;
        for (int j = 0; j < jobs; ++j) ids.push_back(std::int32_t(rng()() % std::uint32_t(E / 2)));  // repeats
        std::vector<bool> seen(std::size_t(E), false);
        std::uint32_t want = 7;
        for (const std::int32_t e : ids) {
            if (differs[std::size_t(e)] && !seen[std::size_t(e)]) ++want;
            seen[std::size_t(e)] = true;
        }
        aff::gpu::Buffer dt = to_device(table), ds = to_device(stage), di = to_device(ids);
        aff::gpu::Buffer counter = to_device(std::vector<std::uint32_t>{7});
        aff::gpu::expert_stage_hits(di.as<const std::int32_t>(), jobs, dt.as<const std::uint8_t* const>(),
                                    ds.as<const std::uint8_t* const>(), counter.as<std::uint32_t>(), s.handle());
        s.synchronize();
        const std::uint32_t got = to_host<std::uint32_t>(counter, 1)[0];
        add(rows, f, "hits, " + std::to_string(E) + " experts, " + std::to_string(jobs) + " jobs with repeats: |counter - want|",
            double(got > want ? got - want : want - got), 0.0);
    }
    // Refusals.
    aff::gpu::Buffer ids = to_device(std::vector<std::int32_t>(1025, 0)), out(1024 * 4), tab = poisoned(4, sizeof(void*));
    auto refused = [&](const std::string& what, const std::function<void()>& call) {
        add(rows, f, "refused: " + what + " (1 = not unsupported)", unsupported(call), 0.0);
    };
    const auto* id = ids.as<const std::int32_t>();
    refused("priorities of 7 jobs at top 6", [&] { aff::gpu::expert_stage_priorities(id, 7, 6, 16, out.as<std::int32_t>(), s.handle()); });
    refused("priorities of 1026 jobs", [&] { aff::gpu::expert_stage_priorities(id, 1026, 6, 16, out.as<std::int32_t>(), s.handle()); });
    refused("priorities over 0 experts", [&] { aff::gpu::expert_stage_priorities(id, 6, 6, 0, out.as<std::int32_t>(), s.handle()); });
    refused("priorities into null", [&] { aff::gpu::expert_stage_priorities(id, 6, 6, 16, nullptr, s.handle()); });
    refused("hits of 1025 jobs", [&] {
        aff::gpu::expert_stage_hits(id, 1025, tab.as<const std::uint8_t* const>(), tab.as<const std::uint8_t* const>(),
                                    out.as<std::uint32_t>(), s.handle());
    });
    refused("hits with a null counter", [&] {
        aff::gpu::expert_stage_hits(id, 6, tab.as<const std::uint8_t* const>(), tab.as<const std::uint8_t* const>(), nullptr,
                                    s.handle());
    });
    s.synchronize();
}

}  // namespace

AFF_DEVICE_TEST("expert_stage") {
    for (const Case& k : hand_cases()) {
        try {
            run_case(k, rows);
        } catch (const std::exception& e) {
            rows.push_back({"expert_stage", k.name + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
    // 2 full 64 KiB copy blocks and a partial one of 777 16-byte words (both copy loops).
    const std::size_t multi = 2 * 65536 + 777 * 16;
    std::vector<Case> random = {
        random_case("random 64 experts of 143504 bytes, min 1 job, 32 slots", 64, multi, 1, 32),
        random_case("random 64 experts of 143504 bytes, min 65 jobs, 32 slots", 64, multi, kTile + 1, 32),
        random_case("random 64 experts, min 1 job, 5 slots", 64, 4096, 1, 5),
        random_case("random 64 experts, no slot", 64, 4096, 1, 0),
        random_case("random 64 experts, 5 slots, null counters", 64, 4096, 1, 5, false),
        random_case("random 1024 experts (the limit) of 512 bytes, 64 slots", aff::gpu::kExpertStageMaxExperts, 512, 1, 64),
        random_case("random 1024 experts, min 65 jobs, 1024 slots", aff::gpu::kExpertStageMaxExperts, 256, kTile + 1, 1024),
    };
    // The decode prefetch's throttled copy (copy_blocks): one block for a whole extent, 3 with
    // uneven shares, 8, and more blocks than the extent has 64 KiB chunks (3); then 8 loads in
    // flight a thread (copy_depth 8: the unrolled loop and its tail) on 1, 3 and 8 blocks; then
    // the bulk copy (copy_bulk: a block's share in 16 KiB chunks, the last partial, through a
    // ring of 4 or 8 that wraps) on 1, 3 (uneven shares), 8 and 50 blocks, and an extent of
    // one partial chunk.
    struct Copy {
        int blocks, depth;
        bool bulk;
        std::size_t bytes;
        int chunk_kib = 16;
    };
    for (const Copy& c : std::vector<Copy>{{1, 4, false, multi}, {3, 4, false, multi}, {8, 4, false, multi}, {50, 4, false, multi},
                                           {1, 8, false, multi}, {3, 8, false, multi}, {8, 8, false, multi}, {1, 4, true, multi},
                                           {1, 8, true, multi}, {3, 4, true, multi}, {8, 8, true, multi}, {50, 4, true, multi},
                                           {2, 8, true, 4096}, {3, 8, true, multi, 4}, {8, 4, true, multi, 8},
                                           {16, 8, true, multi, 4}}) {
        random.push_back(random_case("random 64 experts of " + std::to_string(c.bytes) + " bytes, 6 slots, copy_blocks " +
                                         std::to_string(c.blocks) + (c.depth == 4 ? "" : ", copy_depth " + std::to_string(c.depth)) +
                                         (c.bulk ? ", bulk of " + std::to_string(c.chunk_kib) + " KiB chunks" : ""),
                                     64, c.bytes, 1, 6));
        random.back().copy_blocks = c.blocks;
        random.back().copy_depth = c.depth;
        random.back().copy_bulk = c.bulk;
        random.back().copy_chunk_kib = c.chunk_kib;
    }
    for (const Case& k : random) {
        try {
            run_case(k, rows);
        } catch (const std::exception& e) {
            rows.push_back({"expert_stage", k.name + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
    try {
        Case one;
        one.name = "one expert, in the pool, 1 job, 1 slot";
        one.place = {Place::pool};
        one.counts = {1};
        one.slots = 1;
        one.bytes = 16;
        one.want = std::vector<int>{0};
        one.want_counters = Counters{1, 0, 0, 1};
        run_case(one, rows);
        refusals(rows);
        prefetch_kernels(rows);
    } catch (const std::exception& e) {
        rows.push_back({"expert_stage", std::string("threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
