// Tests for libaff/trace/synthetic and profile_from_trace: the generator is deterministic
// in its seeds, a family's traces have the shape its documentation claims (measured with
// aff-trace's own summary: hash layers share about K/E of their experts between consecutive
// tokens, learned layers have a heavy head and a long tail, the uniform family has neither),
// and a fitted profile counts every selection once.
#include "libaff/trace/profile_from_trace.hpp"
#include "libaff/trace/summary.hpp"
#include "libaff/trace/synthetic.hpp"

#include <catch2/catch.hpp>

#include <numeric>

using namespace aff::trace;

namespace {

struct Means {
    double hash_overlap = 0, topk_overlap = 0, top_tenth = 0, cover99 = 0;
};

Means decode_means(const RouteTrace& t) {
    const TraceSummary s = summarize(t);
    const PhasePopularity* decode = nullptr;
    for (const auto& p : s.phases)
        if (p.phase == Phase::decode) decode = &p;
    REQUIRE(decode);
    Means m;
    int hash = 0, topk = 0;
    for (const LayerPopularity& l : decode->layers) {
        if (l.hash) {
            m.hash_overlap += l.overlap(t.header.top_k);
            ++hash;
        } else {
            m.topk_overlap += l.overlap(t.header.top_k);
            m.top_tenth += l.top_tenth_share;
            m.cover99 += l.cover99;
            ++topk;
        }
    }
    m.hash_overlap /= hash;
    m.topk_overlap /= topk;
    m.top_tenth /= topk;
    m.cover99 /= topk;
    return m;
}

}  // namespace

TEST_CASE("synthetic traces are deterministic in their seeds", "[trace]") {
    SyntheticParams p = synthetic_family("v4flash");
    p.sequences = 1, p.decode_tokens = 16;
    const RouteTrace a = synthesize(p), b = synthesize(p);
    REQUIRE(a.steps.size() == 4 + 16);
    REQUIRE(a.token_steps() == 256 + 16);
    for (std::size_t s = 0; s < a.steps.size(); ++s) REQUIRE(a.steps[s].experts == b.steps[s].experts);
    p.seed = 2;
    const RouteTrace c = synthesize(p);
    std::size_t same = 0;
    for (std::size_t s = 0; s < a.steps.size(); ++s) same += a.steps[s].experts == c.steps[s].experts;
    REQUIRE(same == 0);
    REQUIRE_THROWS_WITH(synthetic_family("zipf"), Catch::Contains("unknown synthetic family \"zipf\""));
}

TEST_CASE("the v4flash family has the documented shape and uniform has none", "[trace]") {
    SyntheticParams p = synthetic_family("v4flash");
    p.sequences = 2;
    const Means v = decode_means(synthesize(p));
    // Hash layers: ≈ K/E = 2.3 % plus repeated tokens; learned layers: the documented
    // 63-66 % busiest tenth and 241-243 experts for 99 %.
    CHECK(v.hash_overlap > 0.015);
    CHECK(v.hash_overlap < 0.06);
    CHECK(v.top_tenth > 0.60);
    CHECK(v.top_tenth < 0.70);
    CHECK(v.cover99 > 235);
    CHECK(v.cover99 < 250);
    CHECK(v.topk_overlap > 0.2);  // a heavy head makes consecutive tokens share experts
    const Means u = decode_means(synthesize([] {
        SyntheticParams q = synthetic_family("uniform");
        q.sequences = 2;
        return q;
    }()));
    CHECK(u.top_tenth < 0.2);
    CHECK(u.topk_overlap < 0.05);
}

TEST_CASE("a profile fitted from a trace counts every selection once", "[trace]") {
    SyntheticParams p = synthetic_family("tiny");
    p.decode_tokens = 40;
    const RouteTrace t = synthesize(p);
    const auto profile = profile_from_trace(t);
    REQUIRE(profile.layers == 2);
    REQUIRE(profile.experts == 8);
    REQUIRE(profile.source == aff::quant::ProfileSource::route_trace);
    REQUIRE(std::accumulate(profile.counts.begin(), profile.counts.end(), std::uint64_t(0)) == t.token_steps() * 2 * 2);
    std::uint64_t layer1_expert3 = 0;
    for (const TraceStep& s : t.steps)
        for (std::size_t i = 0; i < s.n(); ++i)
            for (std::uint16_t e : s.selection(1, i, 2)) layer1_expert3 += e == 3;
    REQUIRE(profile.count(1, 3) == layer1_expert3);
    TraceHeader other = t.header;
    other.experts = 16;
    REQUIRE_THROWS_WITH(placement_counts(profile, other),
                        "the profile is for 2 layers x 8 experts, the trace's model has 2 x 16");
}
