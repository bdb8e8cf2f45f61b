// Tests for TierBook (libaff/placement/tier_book.hpp), the slots behind the GPU mover's moves.
// The mover once lost track of experts it dropped from the slab back to the SSD (issue 17: a
// layer that had none on the SSD at load still counted none, so it never staged the dropped
// expert and the kernel read a null entry; the wrong logits came from the dropped expert's
// extent being unknown to the SSD reader, ssd_tier.cpp). Here: the initial slots, each kind of
// move with its slots worked out by hand, the per-layer SSD counts after drops, refusals that
// change nothing, and, driven by the engine with the demand and heat policies on random
// dispatches, the book agreeing with the engine's tiers after every dispatch, every slot held
// by at most one expert, the free slots exactly the unheld ones, the per-layer SSD counts the
// tiers' own, and the SSD total constant (what one layer's staging slots are sized for).
#include "libaff/core/error.hpp"
#include "libaff/placement/engine.hpp"
#include "libaff/placement/tier_book.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace aff::placement;

namespace {

Geometry geometry(std::uint32_t layers, std::uint32_t experts) {
    Geometry g;
    g.layers = layers;
    g.experts = experts;
    g.expert_bytes = 100;
    g.hash_layers.assign(layers, false);
    return g;
}

std::vector<ExpertKey> key_order(const Geometry& g) {
    std::vector<ExpertKey> order(g.keys());
    std::iota(order.begin(), order.end(), ExpertKey(0));
    return order;
}

// Every slot of a tier held once, the free ones the rest, the per-layer counts the tiers'.
void check_consistent(const TierBook& b, const Slots& slots) {
    const Geometry& g = b.geometry();
    std::vector<int> gpu(slots.gpu, 0), host(slots.host, 0);
    std::vector<std::uint32_t> ssd(g.layers, 0);
    for (ExpertKey k = 0; k < g.keys(); ++k) {
        if (b.tier(k) == Tier::gpu) {
            REQUIRE(b.slot(k) < slots.gpu);
            ++gpu[b.slot(k)];
        } else if (b.tier(k) == Tier::host) {
            REQUIRE(b.slot(k) < slots.host);
            ++host[b.slot(k)];
        } else {
            ++ssd[g.layer_of(k)];
        }
    }
    CHECK(std::count(gpu.begin(), gpu.end(), 1) + b.free_gpu() == slots.gpu);
    CHECK(std::count_if(gpu.begin(), gpu.end(), [](int n) { return n > 1; }) == 0);
    CHECK(std::count(host.begin(), host.end(), 1) + b.free_host() == slots.host);
    CHECK(std::count_if(host.begin(), host.end(), [](int n) { return n > 1; }) == 0);
    for (std::uint32_t l = 0; l < g.layers; ++l) CHECK(b.ssd_in_layer(l) == ssd[l]);
}

}  // namespace

TEST_CASE("tier book: initial slots in placement order", "[placement]") {
    const Geometry g = geometry(2, 4);
    const Slots slots{3, 2};
    const std::vector<ExpertKey> order = {5, 1, 0, 7, 2, 3, 4, 6};
    const TierBook b(g, slots, order);
    CHECK(b.tier(5) == Tier::gpu);
    CHECK(b.slot(5) == 0);
    CHECK(b.slot(1) == 1);
    CHECK(b.slot(0) == 2);
    CHECK(b.tier(7) == Tier::host);
    CHECK(b.slot(7) == 0);
    CHECK(b.tier(2) == Tier::host);
    CHECK(b.slot(2) == 1);
    CHECK(b.tier(3) == Tier::ssd);
    CHECK(b.ssd_in_layer(0) == 1);  // 3
    CHECK(b.ssd_in_layer(1) == 2);  // 4, 6
    CHECK(b.free_gpu() == 0);
    CHECK(b.free_host() == 0);
    check_consistent(b, slots);
}

TEST_CASE("tier book: an SSD expert evicting into a full pool drops its victim to the SSD", "[placement]") {
    // Layer 0 entirely in the slab and the pool at load: no layer-0 expert on the SSD.
    const Geometry g = geometry(2, 4);
    const Slots slots{3, 1};
    TierBook b(g, slots, key_order(g));
    REQUIRE(b.ssd_in_layer(0) == 0);
    REQUIRE(b.ssd_in_layer(1) == 4);
    const TierBook::Move m = b.admit({5, true, 1}, Tier::ssd);
    CHECK(m.admit == 5);
    CHECK(m.from == Tier::ssd);
    CHECK(m.gpu_slot == 1);  // the victim's
    CHECK(m.evicts);
    CHECK(m.evict == 1);
    CHECK(m.evict_to == Tier::ssd);
    CHECK(b.tier(5) == Tier::gpu);
    CHECK(b.slot(5) == 1);
    CHECK(b.tier(1) == Tier::ssd);
    CHECK(b.ssd_in_layer(0) == 1);  // layer 0 now stages after its router
    CHECK(b.ssd_in_layer(1) == 3);
    check_consistent(b, slots);
    // And back: the dropped expert promoted again, evicting the one that took its slot.
    const TierBook::Move back = b.admit({1, true, 5}, Tier::ssd);
    CHECK(back.gpu_slot == 1);
    CHECK(b.tier(1) == Tier::gpu);
    CHECK(b.tier(5) == Tier::ssd);
    CHECK(b.ssd_in_layer(0) == 0);
    CHECK(b.ssd_in_layer(1) == 4);
    check_consistent(b, slots);
}

TEST_CASE("tier book: a pool expert swaps with its victim; refusals change nothing", "[placement]") {
    const Geometry g = geometry(1, 8);
    const Slots slots{4, 3};
    TierBook b(g, slots, key_order(g));  // 0-3 slab, 4-6 pool, 7 SSD
    // From the pool, evicting: the victim takes the pool slot the promoted expert leaves.
    const TierBook::Move m = b.admit({5, true, 2}, Tier::host);
    CHECK(m.from == Tier::host);
    CHECK(m.from_slot == 1);
    CHECK(m.gpu_slot == 2);
    CHECK(m.evict_to == Tier::host);
    CHECK(m.evict_slot == 1);
    CHECK(b.tier(2) == Tier::host);
    CHECK(b.slot(2) == 1);
    CHECK(b.slot(5) == 2);
    check_consistent(b, slots);
    // A pool expert's victim must go to the pool (the engine always has room for it there).
    CHECK_THROWS_AS(b.admit({6, true, 0}, Tier::ssd), aff::Error);
    CHECK(b.tier(6) == Tier::host);
    CHECK(b.tier(0) == Tier::gpu);
    // A full slab refuses an admission without a victim; a victim must be in the slab.
    CHECK_THROWS_AS(b.admit({7, false, 0}, Tier::ssd), aff::Error);
    CHECK_THROWS_AS(b.admit({7, true, 6}, Tier::ssd), aff::Error);
    CHECK_THROWS_AS(b.admit({0, true, 1}, Tier::ssd), aff::Error);  // 0 is already in the slab
    CHECK(b.tier(7) == Tier::ssd);
    CHECK(b.ssd_in_layer(0) == 1);
    check_consistent(b, slots);
}

TEST_CASE("tier book: an SSD expert's victim demoted to a full pool is refused", "[placement]") {
    const Geometry g = geometry(1, 6);
    const Slots slots{2, 2};
    TierBook b(g, slots, key_order(g));  // 0,1 slab; 2,3 pool; 4,5 SSD
    CHECK_THROWS_AS(b.admit({4, true, 0}, Tier::host), aff::Error);  // the pool is full
    CHECK(b.tier(0) == Tier::gpu);
    CHECK(b.tier(4) == Tier::ssd);
    const TierBook::Move drop = b.admit({4, true, 0}, Tier::ssd);   // 0 to the SSD
    CHECK(drop.gpu_slot == 0);
    const TierBook::Move up = b.admit({2, true, 1}, Tier::host);  // 1 into 2's pool slot
    CHECK(up.evict_slot == 0);
    CHECK(b.slot(1) == 0);
    CHECK(b.slot(2) == 1);
    CHECK(b.ssd_in_layer(0) == 2);  // 0 and 5
    check_consistent(b, slots);
}

TEST_CASE("tier book: follows the engine under demand and heat on random dispatches", "[placement]") {
    for (const char* strategy : {"demand", "heat"}) {
        for (const Slots slots : {Slots{6, 4}, Slots{6, 0}, Slots{2, 9}, Slots{16, 0}}) {
            DYNAMIC_SECTION(strategy << ", " << slots.gpu << " slab, " << slots.host << " pool") {
                Geometry g = geometry(4, 16);
                g.hash_layers = {true, true, false, false};
                const std::vector<ExpertKey> order = key_order(g);
                RecordingPolicy policy(make_policy(strategy));
                PlacementEngine engine(g, slots, order, policy);
                TierBook book(g, slots, order);
                const std::uint32_t ssd_total = g.keys() - slots.gpu - slots.host;
                std::mt19937 rng(17);
                std::uint64_t moves = 0, drops = 0;
                std::vector<ExpertKey> keys;
                std::vector<std::uint32_t> tokens;
                for (std::uint64_t i = 0; i < 400; ++i) {
                    const std::uint32_t l = std::uint32_t(i % g.layers);
                    std::set<std::uint32_t> chosen;
                    const std::uint32_t n = 1 + std::uint32_t(rng() % 6);
                    while (chosen.size() < n) chosen.insert(std::uint32_t(rng() % (rng() % 3 == 0 ? 16 : 5)));  // skewed
                    keys.clear();
                    tokens.clear();
                    for (const std::uint32_t e : chosen) {
                        keys.push_back(g.key(l, e));
                        tokens.push_back(1 + std::uint32_t(rng() % 3));
                    }
                    Dispatch d;
                    d.index = i;
                    d.step = i / g.layers;
                    d.layer = l;
                    d.hash = g.hash_layers[l];
                    d.experts = keys;
                    d.tokens = tokens;
                    policy.decided.clear();
                    engine.dispatch(d);
                    for (const Admission& a : policy.decided) {
                        const TierBook::Move m = book.admit(a, a.evicts ? engine.tier(a.evict) : Tier::ssd);
                        ++moves;
                        drops += m.evicts && m.evict_to == Tier::ssd;
                    }
                    for (ExpertKey k = 0; k < g.keys(); ++k) REQUIRE(book.tier(k) == engine.tier(k));
                    std::uint32_t ssd = 0;
                    for (std::uint32_t layer = 0; layer < g.layers; ++layer) ssd += book.ssd_in_layer(layer);
                    REQUIRE(ssd == ssd_total);
                }
                check_consistent(book, slots);
                CHECK(moves > 0);
                if (slots.host == 0) CHECK(drops > 0);  // experts went back to the SSD
            }
        }
    }
}
