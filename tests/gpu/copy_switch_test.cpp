// Device test of the decode prefetch's copy-engine path (kernels/copy_switch.hpp with
// Stream::capture_switch / capture_switch_copies), on a synthetic pool, where the tiers test
// (tiers_test.cpp) sees it only through bit-identical logits and its counters. A graph is
// captured as GpuModel::Impl::prefetch_predicted captures it: expert_stage_pick, then
// copy_switch_select, a switch a slot whose body e copies expert e from the snapshot's host
// address, then expert_stage_copy for the slots the engine did not take. 12 experts of 160 KiB
// + 48 bytes (random bytes) in a pinned pool, expert 2 in HBM (never far); the snapshot has
// every pooled expert where it is except expert 1, whose entry and body point at expert 3 (as
// after a move: the kernel must copy it, and a body run for it would land expert 3's bytes).
// The graph is launched three times with new counts in between (the counts are read on the
// device, as a replayed decode step reads its prediction): picks {5, 1, 7} (1 stale), {0, 6}
// and the HBM expert (one slot left empty), then no far expert at all. Rows per launch, each
// held to 0: every taken slot holds its expert's bytes; an empty slot keeps its poison; the
// slot's expert as the pick wrote it; the engine counter's increase (slots whose expert the
// snapshot places right); the sources left for the kernel (null where the engine copied).
// On a build without switch nodes (HIP) the rows say that capture_switch is refused.
#include "device_test.hpp"

#include "kernels/copy_switch.hpp"
#include "kernels/expert_stage.hpp"
#include "libaff/core/error.hpp"
#include "libaff/gpu/device.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

constexpr int kExperts = 12, kSlots = 3, kHbmExpert = 2, kStaleExpert = 1, kStaleTarget = 3;
constexpr std::size_t kBytes = 160 * 1024 + 48;
constexpr std::uint8_t kPoison = 0xa5;

void engine_graph(std::vector<Row>& rows) {
    const std::string f = "copy_switch";
    aff::gpu::Stream s;
    aff::gpu::PinnedBuffer pool(kBytes * kExperts);
    auto* host = static_cast<std::uint8_t*>(pool.data());
    for (std::size_t i = 0; i < pool.size(); ++i) host[i] = std::uint8_t(rng()());
    std::vector<std::uint8_t> hbm_bytes(kBytes);
    for (auto& b : hbm_bytes) b = std::uint8_t(rng()());
    aff::gpu::Buffer hbm = to_device(hbm_bytes);
    const auto* device = static_cast<const std::uint8_t*>(pool.device_data());
    std::vector<const std::uint8_t*> table(kExperts), snapshot(kExperts);
    std::vector<const void*> sources(kExperts);
    for (int e = 0; e < kExperts; ++e) {
        table[e] = device + std::size_t(e) * kBytes;
        snapshot[e] = table[e];
        sources[e] = host + std::size_t(e) * kBytes;
    }
    table[kHbmExpert] = hbm.as<const std::uint8_t>();
    snapshot[kHbmExpert] = nullptr;
    sources[kHbmExpert] = nullptr;
    snapshot[kStaleExpert] = device + std::size_t(kStaleTarget) * kBytes;
    sources[kStaleExpert] = host + std::size_t(kStaleTarget) * kBytes;

    aff::gpu::Buffer dtable = to_device(table), dsnap = to_device(snapshot);
    aff::gpu::Buffer counts = to_device(std::vector<std::int32_t>(kExperts, 0));
    aff::gpu::Buffer stage_table(sizeof(void*) * kExperts), slot_source(sizeof(void*) * kSlots);
    aff::gpu::Buffer slot_expert(sizeof(std::int32_t) * kSlots), counter = to_device(std::vector<std::uint32_t>{5});
    aff::gpu::Buffer slots(kBytes * kSlots);
    aff::gpu::ExpertStageArgs a;
    a.table = dtable.as<const std::uint8_t*>();
    a.experts = kExperts;
    a.counts = counts.as<std::int32_t>();
    a.far_lo[0] = device;
    a.far_hi[0] = device + pool.size();
    a.slots = slots.as<std::uint8_t>();
    a.slot_stride = kBytes;
    a.slot_count = kSlots;
    a.bytes = kBytes;
    a.copy_blocks = 4;
    a.stage_table = stage_table.as<const std::uint8_t*>();
    a.slot_source = slot_source.as<const std::uint8_t*>();
    a.slot_expert = slot_expert.as<std::int32_t>();

    if (!aff::gpu::copy_switch_available()) {
        bool refused = false;
        try {
            (void)s.capture_switch(kExperts);
        } catch (const aff::Error&) {
            refused = true;
        }
        add(rows, f, "no switch nodes in this build: capture_switch refused (1 = not)", refused ? 0.0 : 1.0, 0.0);
        return;
    }
    aff::gpu::Graph graph;
    graph.capture(s, [&] {
        aff::gpu::expert_stage_pick(a, s.handle());
        aff::gpu::CopySwitchSelect sel;
        sel.slot_expert = a.slot_expert;
        sel.slot_source = a.slot_source;
        sel.snapshot = dsnap.as<const std::uint8_t*>();
        sel.slots = kSlots;
        sel.none = kExperts;
        sel.counter = counter.as<std::uint32_t>();
        for (int i = 0; i < kSlots; ++i) sel.handles[i] = s.capture_switch(sel.none);
        aff::gpu::copy_switch_select(sel, s.handle());
        for (int i = 0; i < kSlots; ++i)
            s.capture_switch_copies(sel.handles[i], slots.as<std::uint8_t>() + std::size_t(i) * kBytes, sources, kBytes);
        aff::gpu::expert_stage_copy(a, s.handle());
    });

    struct Launch {
        const char* name;
        std::vector<std::pair<int, int>> counts;  // expert, count
        std::vector<int> want;                    // the slots' experts, -1 empty
    };
    const std::vector<Launch> launches = {
        {"picks {5, 1, 7}, 1 moved since the snapshot", {{5, 9}, {1, 8}, {7, 7}, {kHbmExpert, 20}}, {5, 1, 7}},
        {"picks {0, 6}, the HBM expert busiest, one slot empty", {{0, 9}, {6, 8}, {kHbmExpert, 20}}, {0, 6, -1}},
        {"no far expert routed to", {{kHbmExpert, 20}}, {-1, -1, -1}},
    };
    std::uint32_t engine_before = 5;
    for (const Launch& l : launches) {
        std::vector<std::int32_t> c(kExperts, 0);
        for (const auto& [e, n] : l.counts) c[e] = n;
        upload(counts, c.data(), c.size() * sizeof(std::int32_t));
        s.fill(slots.data(), kPoison, slots.size());
        graph.launch(s);
        s.synchronize();
        const std::vector<std::uint8_t> got = to_host<std::uint8_t>(slots, slots.size());
        const std::vector<std::int32_t> took = to_host<std::int32_t>(slot_expert, kSlots);
        const std::vector<std::uintptr_t> left = to_host<std::uintptr_t>(slot_source, kSlots);
        const std::uint32_t engine_now = to_host<std::uint32_t>(counter, 1)[0];
        std::uint32_t want_engine = 0;
        const std::string what = std::string("graph launch, ") + l.name;
        for (int i = 0; i < kSlots; ++i) {
            const int e = l.want[i];
            const std::uint8_t* slot = got.data() + std::size_t(i) * kBytes;
            long long wrong = 0;
            for (std::size_t b = 0; b < kBytes; ++b) wrong += slot[b] != (e < 0 ? kPoison : host[std::size_t(e) * kBytes + b]);
            const std::string at = what + ": slot " + std::to_string(i);
            add(rows, f, at + (e < 0 ? " empty: bytes not the poison" : " (expert " + std::to_string(e) + "): bytes differing"),
                double(wrong), 0.0);
            add(rows, f, at + ": |expert the pick wrote - want|", double(std::abs(took[i] - e)), 0.0);
            const bool by_engine = e >= 0 && e != kStaleExpert;
            want_engine += by_engine ? 1 : 0;
            const std::uintptr_t want_left = e < 0 || by_engine ? 0 : reinterpret_cast<std::uintptr_t>(table[e]);
            add(rows, f, at + ": source left for the kernel differs", left[i] != want_left ? 1.0 : 0.0, 0.0);
        }
        add(rows, f, what + ": |engine counter's increase - slots the snapshot places right|",
            double(std::llabs(std::int64_t(engine_now - engine_before) - std::int64_t(want_engine))), 0.0);
        engine_before = engine_now;
    }
    // Refusals of the launcher.
    auto refused = [&](const std::string& what, aff::gpu::CopySwitchSelect sel) {
        bool unsupported = false;
        try {
            aff::gpu::copy_switch_select(sel, s.handle());
        } catch (const aff::Error& e) {
            unsupported = e.kind() == aff::ErrorKind::unsupported;
        }
        add(rows, f, "refused: " + what + " (1 = not unsupported)", unsupported ? 0.0 : 1.0, 0.0);
    };
    aff::gpu::CopySwitchSelect ok;
    ok.slot_expert = a.slot_expert;
    ok.slot_source = a.slot_source;
    ok.snapshot = dsnap.as<const std::uint8_t*>();
    ok.slots = 1;
    ok.none = kExperts;
    aff::gpu::CopySwitchSelect bad = ok;
    bad.slots = aff::gpu::kCopySwitchMaxSlots + 1;
    refused("9 slots", bad);
    bad = ok;
    bad.snapshot = nullptr;
    refused("no snapshot", bad);
    bad = ok;
    bad.none = 0;
    refused("none = 0", bad);
    bool outside = false;
    try {
        (void)s.capture_switch(kExperts);
    } catch (const aff::Error&) {
        outside = true;
    }
    add(rows, f, "capture_switch outside a capture refused (1 = not)", outside ? 0.0 : 1.0, 0.0);
    add(rows, f, "capturing() outside a capture", s.capturing() ? 1.0 : 0.0, 0.0);
}

}  // namespace

AFF_DEVICE_TEST("copy_switch") {
    try {
        engine_graph(rows);
    } catch (const std::exception& e) {
        rows.push_back({"copy_switch", std::string("threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
