// Tests for libaff/placement's engine and policies, driven through aff-trace's replay
// (libaff/trace/replay): a six-dispatch case whose counters were worked out by hand for
// every policy (in the comments), the cost model's identities on random traces, and the
// property that no policy ever gets more GPU hits than Belady's MIN on the same trace,
// capacity and initial placement.
#include "libaff/core/error.hpp"
#include "libaff/placement/engine.hpp"
#include "libaff/placement/policy.hpp"
#include "libaff/trace/replay.hpp"

#include "unit/trace/random_trace.hpp"

#include <catch2/catch.hpp>

#include <initializer_list>
#include <random>
#include <map>
#include <tuple>
#include <string>

using namespace aff;
using namespace aff::trace;

namespace {

// One layer of `experts` experts of 100 bytes, top-1: each step's tokens choose the listed
// experts (a step of several tokens is a prefill chunk).
RouteTrace one_layer_trace(std::uint32_t experts, std::initializer_list<std::initializer_list<std::uint16_t>> steps) {
    RouteTrace t;
    t.header.layers = 1;
    t.header.experts = experts;
    t.header.top_k = 1;
    t.header.expert_bytes = 100;
    t.header.hash_layers = {false};
    std::uint32_t pos = 0;
    for (const auto& chosen : steps) {
        TraceStep s;
        for (std::uint16_t e : chosen) {
            s.tokens.push_back({7, 0, pos++, chosen.size() > 1 ? Phase::prefill : Phase::decode});
            s.experts.push_back(e);
            s.weights.push_back(1.0f);
        }
        s.layers = {0};
        t.steps.push_back(s);
    }
    return t;
}

// Four experts, one token a step choosing 2, 3, 2, 0, 3, 1.
RouteTrace hand_trace() { return one_layer_trace(4, {{2}, {3}, {2}, {0}, {3}, {1}}); }

struct Expect {
    std::uint64_t gpu, host, ssd, admissions, demotions, drops, pcie, ssd_bytes, hbm;
};

}  // namespace

TEST_CASE("replay reproduces the hand-computed case for every policy", "[placement]") {
    // GPU 2 slots, host 1 slot; profile [10, 5, 1, 0] puts 0, 1 on the GPU, 2 in the host
    // pool, 3 on SSD. Victims tie-break to the lower key; a victim goes to the host when
    // the pool has room (1 PCIe transfer), else it is dropped.
    ReplayOptions o;
    o.gpu_bytes = {200};
    o.host_bytes = 100;
    o.profile = {10, 5, 1, 0};
    const std::map<std::string, Expect> expect = {
        // static: 2 host, 3 ssd, 2 host, 0 gpu, 3 ssd, 1 gpu.
        {"static", {2, 2, 2, 0, 0, 0, 400, 200, 200}},
        // lru: 2 evicts 0 (to host), 3 evicts 1 (dropped), 2 hits, 0 evicts 3 (to host),
        // 3 evicts 2 (to host), 1 evicts 0 (dropped).
        {"lru", {1, 3, 2, 5, 3, 2, 800, 200, 100}},
        // lfu: as lru until 0 evicts 3 (count 1 < 2's 2), 3 evicts 0, 1 evicts 2 (older of the 2-counts).
        {"lfu", {1, 3, 2, 5, 3, 2, 800, 200, 100}},
        // demand (FIFO): 2 evicts 0, 3 evicts 1, 2 hits, 0 evicts 2, 3 hits, 1 evicts 3.
        {"demand", {2, 2, 2, 4, 2, 2, 600, 200, 200}},
        // belady: 2 (next 2) evicts 1 (next 5) to host; 3 (next 4) is bypassed (0's next is 3);
        // 2 and 0 hit; 3 and 1 are not used again, so not admitted.
        {"belady", {2, 2, 2, 1, 1, 0, 500, 200, 200}},
        // heat (half-life 32 steps; one token a dispatch, so the token weight does not matter): 2 and 3 (heat 1) replace the cold residents 0 (to host)
        // and 1 (dropped); 0 (heat 1) streams from the host but does not beat 3
        // (2^(-2/32) = 0.96) by 25 %; 3 hits; 1 (heat 1) misses from SSD and does not beat 2 (1.83).
        {"heat", {2, 2, 2, 2, 1, 1, 500, 200, 200}},
    };
    for (const auto& [policy, e] : expect) {
        INFO(policy);
        o.policies = {policy};
        const auto r = replay(hand_trace(), o);
        REQUIRE(r.size() == 1);
        const placement::Counters& c = r[0].counters;
        CHECK(c.accesses == 6);
        CHECK(c.gpu_hits == e.gpu);
        CHECK(c.host_hits == e.host);
        CHECK(c.ssd_reads == e.ssd);
        CHECK(c.admissions == e.admissions);
        CHECK(c.demotions_to_host == e.demotions);
        CHECK(c.drops == e.drops);
        CHECK(c.pcie_bytes == e.pcie);
        CHECK(c.ssd_bytes == e.ssd_bytes);
        CHECK(c.hbm_bytes == e.hbm);
        CHECK(r[0].token_steps == 6);
    }
}

TEST_CASE("heat credits a dispatch tokens^token_weight, worked by hand", "[placement]") {
    // One layer, three experts of 100 bytes, top-1: a 4-token prefill step choosing 0, then
    // four decode steps choosing 1. GPU 1 slot, host 2; profile [1, 2, 5] puts 2 on the GPU,
    // 1 and 0 in the host pool. Half-life 32 steps (d = 2^(-1/32) = 0.97857 a step),
    // hysteresis 0.25, min-gain 0.5. Every step: 0 streams from the host at step 0 and beats
    // the cold resident 2 (2^-60), which goes to the host; 1 is credited 1 a step:
    // heat 1, 1.9786, 2.9362 at steps 1, 2, 3. Expert 0's heat after step 0 is c = 4^w.
    //   w = 1:   c = 4; at step 3 0 has 4 d^3 = 3.748 and 1 needs 1.25 x 3.748 = 4.685:
    //            never admitted (steps 1-4 all miss): 0 GPU hits, 1 admission.
    //   w = 0.5: c = 2; at step 2 1 needs 1.25 x 2 d^2 = 2.394 > 1.9786; at step 3
    //            1.25 x 2 d^3 = 2.342 < 2.9362 (gain 1.06 >= 0.5): 1 replaces 0 (to the
    //            host); step 4 hits: 1 GPU hit, 2 admissions.
    //   w = 0:   c = 1; at step 2 1.25 x d^2 = 1.197 < 1.9786 (gain 1.02): 1 replaces 0;
    //            steps 3 and 4 hit: 2 GPU hits, 2 admissions.
    const RouteTrace t = one_layer_trace(3, {{0, 0, 0, 0}, {1}, {1}, {1}, {1}});
    ReplayOptions o;
    o.gpu_bytes = {100};
    o.host_bytes = 200;
    o.profile = {1, 2, 5};
    o.policies = {"heat"};
    for (const auto& [w, hits, admissions] : {std::tuple{1.0, 0, 1}, std::tuple{0.5, 1, 2}, std::tuple{0.0, 2, 2}}) {
        INFO("token weight " << w);
        o.heat.token_weight = w;
        const placement::Counters c = replay(t, o)[0].counters;
        CHECK(c.accesses == 5);
        CHECK(c.selections == 8);
        CHECK(c.gpu_hits == std::uint64_t(hits));
        CHECK(c.host_hits == 5 - std::uint64_t(hits));
        CHECK(c.admissions == std::uint64_t(admissions));
        CHECK(c.demotions_to_host == std::uint64_t(admissions));  // the pool always has room
        CHECK(c.pcie_bytes == (5 - std::uint64_t(hits) + std::uint64_t(admissions)) * 100);
    }
    o.heat.token_weight = 1.5;
    REQUIRE_THROWS_WITH(replay(t, o), "--token-weight must be from 0 to 1");
}

TEST_CASE("the modelled time is each link's bytes over its bandwidth", "[placement]") {
    ReplayOptions o;
    o.gpu_bytes = {200};
    o.host_bytes = 100;
    o.profile = {10, 5, 1, 0};
    o.policies = {"static"};
    const auto r = replay(hand_trace(), o);
    Bandwidths bw{1.0, 0.5, 0.25};  // GB/s
    // 200 B HBM at 1e9, 400 B PCIe at 0.5e9, 200 B SSD at 0.25e9; over 6 tokens.
    REQUIRE(r[0].seconds_per_token(bw) == Approx((200 / 1e9 + 400 / 0.5e9 + 200 / 0.25e9) / 6));
    REQUIRE(r[0].pcie_bytes_per_token() == Approx(400.0 / 6));
}

TEST_CASE("no policy beats Belady's hit count on random traces", "[placement]") {
    int cases = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        const std::uint32_t layers = 1 + seed % 4, experts = 4 + seed % 29, k = 1 + seed % std::min<std::uint32_t>(4, experts);
        const RouteTrace t = test::random_trace(seed * 31, layers, experts, k, 30 + seed * 5, 1 + seed % 5);
        const DispatchList list = dispatches_of(t, 0);
        ReplayOptions o;
        if (seed % 2) {
            o.profile.resize(std::size_t(layers) * experts);
            for (std::size_t i = 0; i < o.profile.size(); ++i) o.profile[i] = (i * 7919 + seed) % 13;
        }
        o.heat.half_life_steps = 1 + seed % 9;
        o.heat.hysteresis = (seed % 3) * 0.2;
        o.heat.min_gain = (seed % 4) * 0.5;
        o.heat.max_moves = 1 + seed % 5;
        o.heat.token_weight = (seed % 5) * 0.25;
        const std::uint64_t B = t.header.expert_bytes, keys = std::uint64_t(layers) * experts;
        for (std::uint64_t slots : {std::uint64_t(0), std::uint64_t(1), keys / 8, keys / 3, keys / 2, keys - 1}) {
            const std::uint64_t host = (seed % 3) * B * (keys / 4);
            const ReplayResult best = replay_one(list, slots * B, host, "belady", o);
            // Every policy, and heat with one decision made by the oracle (the benchmark's
            // diagnostics): those know the future too and must not beat Belady either.
            for (int v = 0; v < int(placement::policy_names().size()) + 2; ++v) {
                const bool diagnostic = v >= int(placement::policy_names().size());
                const std::string_view p = diagnostic ? "heat" : placement::policy_names()[v];
                ReplayOptions ov = o;
                if (diagnostic) ov.heat.oracle = v == int(placement::policy_names().size()) ? placement::HeatOracle::admission
                                                                                            : placement::HeatOracle::eviction;
                const ReplayResult r = replay_one(list, slots * B, host, std::string(p), ov);
                const placement::Counters& c = r.counters;
                INFO("seed " << seed << " slots " << slots << " policy " << p << (diagnostic ? " (oracle variant)" : ""));
                REQUIRE(c.gpu_hits <= best.counters.gpu_hits);
                // The cost model's identities.
                REQUIRE(c.gpu_hits + c.host_hits + c.ssd_reads == c.accesses);
                REQUIRE(c.pcie_bytes == (c.accesses - c.gpu_hits + c.demotions_to_host) * B);
                REQUIRE(c.ssd_bytes == c.ssd_reads * B);
                REQUIRE(c.admissions == c.demotions_to_host + c.drops);  // the slab starts full
                ++cases;
            }
        }
    }
    REQUIRE(cases == 40 * 6 * 8);
}

TEST_CASE("heat with no moves allowed is the static placement", "[placement]") {
    const RouteTrace t = test::random_trace(5, 3, 16, 2, 200, 3);
    ReplayOptions o;
    o.gpu_bytes = {10 * t.header.expert_bytes};
    o.policies = {"static", "heat"};
    o.heat.max_moves = 0;
    const auto r = replay(t, o);
    REQUIRE(r[0].counters.gpu_hits == r[1].counters.gpu_hits);
    REQUIRE(r[1].counters.admissions == 0);
    o.heat.max_moves = 4;
    REQUIRE(replay(t, o)[1].counters.admissions > 0);
}

// The GPU mover's knobs (placement::gpu_mover_heat_options) against replay's (HeatOptions{}):
// on routing with no favourite they leave the slab alone where the eager ones churn (every
// admission is a copy that stalls the GPU's next call for nothing), and an expert that stays
// hot is still brought in, once.
TEST_CASE("the GPU mover's heat knobs do not churn on uniform routing and still admit a hot expert", "[placement]") {
    // 64 experts, top-1, one token a step drawn uniformly; the slab holds 16.
    std::mt19937_64 rng(11);
    RouteTrace uniform = one_layer_trace(64, {});
    for (std::uint32_t pos = 0; pos < 3000; ++pos) {
        TraceStep s;
        s.tokens.push_back({7, 0, pos, Phase::decode});
        s.experts.push_back(std::uint16_t(rng() % 64));
        s.weights.push_back(1.0f);
        s.layers = {0};
        uniform.steps.push_back(s);
    }
    ReplayOptions o;
    o.gpu_bytes = {16 * uniform.header.expert_bytes};
    o.policies = {"static", "heat"};
    const auto eager = replay(uniform, o);
    o.heat = placement::gpu_mover_heat_options();
    const auto reluctant = replay(uniform, o);
    INFO("eager admissions " << eager[1].counters.admissions << ", reluctant " << reluctant[1].counters.admissions);
    REQUIRE(eager[1].counters.admissions > 300);
    REQUIRE(reluctant[1].counters.admissions * 50 <= eager[1].counters.admissions);
    // Moving bought the eager mover nothing here: no more than 2 % of the accesses over static.
    REQUIRE(double(eager[1].counters.gpu_hits) <= double(eager[0].counters.gpu_hits) + 0.02 * 3000);
    REQUIRE(reluctant[1].counters.gpu_hits + 0.02 * 3000 >= double(reluctant[0].counters.gpu_hits));

    // Expert 7 of 8 chosen every step, the slab holding 0 and 1 (key order): admitted once,
    // within the first dozen steps (heat 1 a step against a cold victim: past 8 at the ninth).
    std::initializer_list<std::uint16_t> seven = {7};
    const RouteTrace hot = one_layer_trace(8, {seven, seven, seven, seven, seven, seven, seven, seven, seven, seven,
                                               seven, seven, seven, seven, seven, seven, seven, seven, seven, seven});
    ReplayOptions h;
    h.gpu_bytes = {2 * hot.header.expert_bytes};
    h.policies = {"heat"};
    h.heat = placement::gpu_mover_heat_options();
    const placement::Counters c = replay(hot, h)[0].counters;
    REQUIRE(c.admissions == 1);
    REQUIRE(c.gpu_hits >= 20 - 12);
}

TEST_CASE("replay refuses unknown policies, foreign profiles and an unknown expert size", "[placement]") {
    RouteTrace t = hand_trace();
    ReplayOptions o;
    o.gpu_bytes = {200};
    o.policies = {"fifo"};
    REQUIRE_THROWS_WITH(replay(t, o), "unknown placement policy \"fifo\" (heat, demand, static, lru, lfu, belady)");
    o.policies = {"lru"};
    o.profile = {1, 2, 3};
    REQUIRE_THROWS_WITH(replay(t, o), "the profile has 3 experts, the trace's model 4");
    o.profile.clear();
    t.header.expert_bytes = 0;
    REQUIRE_THROWS_WITH(replay(t, o), Catch::Contains("give --expert-bytes"));
}
