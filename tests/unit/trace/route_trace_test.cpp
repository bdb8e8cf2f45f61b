// Tests for libaff/trace/route_trace{,_writer}: random traces round-trip through the writer
// and the reader (both codecs, chunk boundaries included), and each kind of damage the spec
// names (truncation, magic, version, out-of-range expert id, digests, reserved bits,
// trailing bytes) is rejected with the message that names the field; draft steps (the MTP
// layer's, layer L; DSpark's stages, L .. L + 2) round-trip, and the writer and the reader
// refuse layer L elsewhere, main layers or a gap in a draft step and steps mixing draft and
// other tokens.
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/trace/route_trace.hpp"
#include "libaff/trace/route_trace_writer.hpp"

#include "unit/file_bytes.hpp"
#include "unit/temp_dir.hpp"
#include "unit/trace/random_trace.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <string>

using namespace aff::trace;

namespace {

void require_equal(const RouteTrace& a, const RouteTrace& b) {
    REQUIRE(a.header.layers == b.header.layers);
    REQUIRE(a.header.experts == b.header.experts);
    REQUIRE(a.header.top_k == b.header.top_k);
    REQUIRE(a.header.identity_kind == b.header.identity_kind);
    REQUIRE(a.header.identity == b.header.identity);
    REQUIRE(a.header.expert_bytes == b.header.expert_bytes);
    REQUIRE(a.header.hash_layers == b.header.hash_layers);
    REQUIRE(a.steps.size() == b.steps.size());
    for (std::size_t s = 0; s < a.steps.size(); ++s) {
        const TraceStep &x = a.steps[s], &y = b.steps[s];
        REQUIRE(x.tokens.size() == y.tokens.size());
        for (std::size_t i = 0; i < x.tokens.size(); ++i) {
            REQUIRE(x.tokens[i].token == y.tokens[i].token);
            REQUIRE(x.tokens[i].sequence == y.tokens[i].sequence);
            REQUIRE(x.tokens[i].position == y.tokens[i].position);
            REQUIRE(x.tokens[i].phase == y.tokens[i].phase);
        }
        REQUIRE(x.layers == y.layers);
        REQUIRE(x.experts == y.experts);
        REQUIRE(std::memcmp(x.weights.data(), y.weights.data(), x.weights.size() * 4) == 0);
    }
}

std::string error_of(const std::vector<std::uint8_t>& bytes) {
    try {
        parse_route_trace(bytes, "t.aft");
    } catch (const aff::Error& e) {
        return e.what();
    }
    return "no error";
}

// A small trace's bytes, uncompressed so that payload bytes can be damaged at known offsets.
std::vector<std::uint8_t> small_trace_bytes(aff::test::TempDir& dir, std::size_t steps = 3) {
    const RouteTrace t = aff::test::random_trace(7, 2, 8, 2, steps, 2);
    write_route_trace(dir / "t.aft", t, Compression::none);
    return aff::test::read_all(dir / "t.aft");
}

// Recomputes the header digest and the first chunk's digest after a deliberate edit, so the
// reader reaches the field under test instead of stopping at a digest.
void fix_digests(std::vector<std::uint8_t>& b, std::uint32_t layers) {
    const std::size_t h = 64 + 8 * ((layers + 7) / 8);
    const std::uint64_t hd = aff::xxh3_64(b.data(), h - 8);
    std::memcpy(&b[h - 8], &hd, 8);
    if (std::memcmp(&b[h], "RTCK", 4) == 0) {
        std::uint64_t stored;
        std::memcpy(&stored, &b[h + 24], 8);
        aff::Xxh3Stream d;
        d.update(&b[h], 40);
        d.update(&b[h + 48], stored);
        const std::uint64_t cd = d.digest();
        std::memcpy(&b[h + 40], &cd, 8);
    }
}

constexpr std::size_t kHeader = 72, kChunk = 72 + 48;  // 2 layers: header 72 bytes; first payload byte

}  // namespace

TEST_CASE("random traces round-trip through the writer and the reader", "[trace]") {
    aff::test::TempDir dir;
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        const RouteTrace t = aff::test::random_trace(seed, 1 + seed % 5, 4 + seed * 5, 1 + seed % 4, seed * 9, 1 + seed % 6);
        for (Compression c : {Compression::none, Compression::zstd}) {
            write_route_trace(dir / "r.aft", t, c);
            const RouteTrace back = read_route_trace(dir / "r.aft");
            require_equal(t, back);
            REQUIRE(back.token_steps() == t.token_steps());
        }
    }
    REQUIRE(dir.entries() == 1);  // no temporary left behind
}

TEST_CASE("a trace larger than one chunk splits between steps and reads back whole", "[trace]") {
    aff::test::TempDir dir;
    // 43 layers x 6 experts, 16 tokens a step: ~26 KB a step, so 100 steps take 3 chunks.
    const RouteTrace t = aff::test::random_trace(3, 43, 256, 6, 100, 16);
    write_route_trace(dir / "big.aft", t, Compression::zstd);
    require_equal(t, read_route_trace(dir / "big.aft"));
    const auto bytes = aff::test::read_all(dir / "big.aft");
    std::uint64_t chunks;
    std::memcpy(&chunks, &bytes[bytes.size() - 40], 8);
    REQUIRE(chunks >= 2);
}

TEST_CASE("an empty trace is a header and an end record", "[trace]") {
    aff::test::TempDir dir;
    RouteTrace t = aff::test::random_trace(1, 3, 8, 2, 0);
    write_route_trace(dir / "e.aft", t);
    REQUIRE(std::filesystem::file_size(dir / "e.aft") == 64 + 8 + 48);
    REQUIRE(read_route_trace(dir / "e.aft").steps.empty());
}

TEST_CASE("a writer that is not published leaves nothing", "[trace]") {
    aff::test::TempDir dir;
    {
        const RouteTrace t = aff::test::random_trace(2, 2, 8, 2, 5);
        RouteTraceWriter w(dir / "x.aft", t.header);
        for (const auto& s : t.steps) w.add(s);
    }
    REQUIRE(dir.entries() == 0);
}

TEST_CASE("the writer refuses a step the reader would reject", "[trace]") {
    aff::test::TempDir dir;
    RouteTrace t = aff::test::random_trace(2, 2, 8, 2, 1, 1);
    RouteTraceWriter w(dir / "x.aft", t.header);
    TraceStep bad = t.steps[0];
    bad.experts[0] = 8;
    REQUIRE_THROWS_WITH(w.add(bad), Catch::Contains("expert id 8 out of range"));
    bad = t.steps[0];
    bad.weights[1] = std::numeric_limits<float>::quiet_NaN();
    REQUIRE_THROWS_WITH(w.add(bad), Catch::Contains("not finite"));
    TraceHeader h = t.header;
    h.top_k = 9;
    REQUIRE_THROWS_WITH(RouteTraceWriter(dir / "y.aft", h), Catch::Contains("top_k 9 out of range"));
}

TEST_CASE("damaged traces are rejected naming the field", "[trace][corrupt]") {
    aff::test::TempDir dir;
    const std::vector<std::uint8_t> good = small_trace_bytes(dir);
    REQUIRE(error_of(good) == "no error");

    SECTION("truncated anywhere") {
        for (std::size_t cut = 0; cut < good.size(); ++cut) {
            const std::vector<std::uint8_t> b(good.begin(), good.begin() + cut);
            const std::string e = error_of(b);
            INFO("cut at " << cut << ": " << e);
            REQUIRE(e.find("truncated") != std::string::npos);
        }
    }
    SECTION("bad magic") {
        auto b = good;
        b[1] = 'X';
        REQUIRE(error_of(b) == "t.aft: not a route trace (bad magic)");
    }
    SECTION("newer version") {
        auto b = good;
        b[8] = 2;
        REQUIRE(error_of(b) == "t.aft: route trace version 2 (this build reads 1)");
    }
    SECTION("header digest") {
        auto b = good;
        b[40] ^= 1;  // expert_bytes
        REQUIRE(error_of(b) == "t.aft: header: digest mismatch");
    }
    SECTION("reserved header field") {
        auto b = good;
        b[29] = 1;
        fix_digests(b, 2);
        REQUIRE(error_of(b) == "t.aft: header: reserved field at offset 28 is not zero");
    }
    SECTION("reserved layer flag bit") {
        auto b = good;
        b[57] = 2;
        fix_digests(b, 2);
        REQUIRE(error_of(b) == "t.aft: header: layer 1 flags have reserved bits set");
    }
    SECTION("top_k above experts") {
        auto b = good;
        b[20] = 9;
        fix_digests(b, 2);
        REQUIRE(error_of(b) == "t.aft: header: top_k 9 out of range (1..min(experts, 64))");
    }
    SECTION("chunk digest") {
        auto b = good;
        b[kChunk + 10] ^= 0x40;
        REQUIRE(error_of(b) == "t.aft: chunk 0: digest mismatch");
    }
    SECTION("bad chunk tag") {
        auto b = good;
        b[kHeader] = 'X';
        REQUIRE(error_of(b) == "t.aft: chunk 0: bad tag");
    }
    SECTION("out-of-range expert id") {
        auto b = good;
        // Step 0: 8-byte header, n token entries, then layer 0's block: layer, reserved, ids.
        const std::uint32_t n = b[kChunk];
        const std::size_t ids = kChunk + 8 + 16 * n + 4;
        b[ids] = 8;
        b[ids + 1] = 0;
        fix_digests(b, 2);
        REQUIRE(error_of(b) == "t.aft: chunk 0: step 0: layer 0 token 0: expert id 8 out of range (8 experts)");
    }
    SECTION("undefined phase") {
        auto b = good;
        b[kChunk + 8 + 12] = 5;
        fix_digests(b, 2);
        REQUIRE(error_of(b) == "t.aft: chunk 0: step 0: token 0: phase 5 is not defined");
    }
    SECTION("end record digest") {
        auto b = good;
        b[b.size() - 30] ^= 1;
        REQUIRE(error_of(b) == "t.aft: end record: digest mismatch");
    }
    SECTION("trailing bytes") {
        auto b = good;
        b.push_back(0);
        REQUIRE(error_of(b) == "t.aft: end record: 1 trailing bytes after the end record");
    }
}

TEST_CASE("publishing again replaces the file with every step so far", "[trace]") {
    aff::test::TempDir dir;
    const RouteTrace t = aff::test::random_trace(4, 3, 16, 2, 10, 3);
    RouteTraceWriter w(dir / "p.aft", t.header, Compression::zstd);
    for (std::size_t i = 0; i < 4; ++i) w.add(t.steps[i]);
    w.publish();
    REQUIRE(read_route_trace(dir / "p.aft").steps.size() == 4);
    for (std::size_t i = 4; i < t.steps.size(); ++i) w.add(t.steps[i]);
    w.publish();
    require_equal(t, read_route_trace(dir / "p.aft"));
    REQUIRE(dir.entries() == 1);
}

namespace {

// Two main layers of 8 experts, top-2; a step of `n` tokens of `phase` recording `layers`.
TraceStep step_of(std::uint32_t n, Phase phase, std::vector<std::uint16_t> layers) {
    TraceStep s;
    for (std::uint32_t i = 0; i < n; ++i) s.tokens.push_back({5 + i, 0, 3 + i, phase});
    s.layers = std::move(layers);
    for (std::size_t j = 0; j < s.layers.size() * n * 2; ++j) {
        s.experts.push_back(static_cast<std::uint16_t>(j % 8));
        s.weights.push_back(0.5f);
    }
    return s;
}

RouteTrace draft_trace(std::vector<TraceStep> steps) {
    RouteTrace t;
    t.header.layers = 2;
    t.header.experts = 8;
    t.header.top_k = 2;
    t.header.identity_kind = IdentityKind::synthetic;
    t.header.hash_layers = {true, false};
    t.steps = std::move(steps);
    return t;
}

}  // namespace

TEST_CASE("a draft step records layers L, L + 1, ... in order, and nothing else may", "[trace]") {
    aff::test::TempDir dir;
    // The MTP layer's calls (formats/route-trace.md 5.1): draft steps of layer L = 2; a DSpark
    // block: one step of its three stages, layers 2, 3, 4 (more blocks than the model's L).
    const RouteTrace t = draft_trace({step_of(3, Phase::prefill, {0, 1}), step_of(2, Phase::draft, {2}),
                                      step_of(1, Phase::draft, {2}), step_of(2, Phase::draft_verify, {0, 1}),
                                      step_of(1, Phase::replay, {0, 1}), step_of(5, Phase::draft, {2, 3, 4})});
    write_route_trace(dir / "d.aft", t, Compression::none);
    const RouteTrace back = read_route_trace(dir / "d.aft");
    require_equal(t, back);
    CHECK(!back.steps[0].draft());
    CHECK(back.steps[1].draft());
    CHECK(back.steps[2].draft());
    CHECK(!back.steps[3].draft());
    CHECK(back.steps[5].draft());
    CHECK(std::string(to_string(Phase::draft)) == "draft");
    CHECK(std::string(to_string(Phase::replay)) == "replay");

    SECTION("the writer refuses a draft step of a main layer, a main step of layer L, and a mixed step") {
        RouteTraceWriter w(dir / "x.aft", t.header);
        REQUIRE_THROWS_WITH(w.add(step_of(1, Phase::draft, {1})), Catch::Contains("layers of a step out of range"));
        REQUIRE_THROWS_WITH(w.add(step_of(1, Phase::draft, {2, 4})), Catch::Contains("layers of a step out of range"));
        REQUIRE_THROWS_WITH(w.add(step_of(1, Phase::draft, {3})), Catch::Contains("layers of a step out of range"));
        REQUIRE_THROWS_WITH(w.add(step_of(1, Phase::decode, {2})), Catch::Contains("layers of a step out of range"));
        TraceStep mixed = step_of(2, Phase::draft, {2});
        mixed.tokens[1].phase = Phase::draft_verify;
        REQUIRE_THROWS_WITH(w.add(mixed), Catch::Contains("draft and other tokens in one step"));
    }
    SECTION("the reader refuses the same, naming the field") {
        // One step of one token: its phase at payload byte 8 + 12, its layer at 8 + 16.
        const std::size_t phase = kChunk + 8 + 12, layer = kChunk + 8 + 16;
        write_route_trace(dir / "m.aft", draft_trace({step_of(1, Phase::decode, {1})}), Compression::none);
        auto b = aff::test::read_all(dir / "m.aft");
        REQUIRE(b[layer] == 1);
        b[layer] = 2;
        fix_digests(b, 2);
        CHECK(error_of(b) == "t.aft: chunk 0: step 0: layer 2 out of range (2 layers)");
        write_route_trace(dir / "m.aft", draft_trace({step_of(1, Phase::draft, {2})}), Compression::none);
        b = aff::test::read_all(dir / "m.aft");
        REQUIRE(b[phase] == 4);
        REQUIRE(b[layer] == 2);
        b[layer] = 1;
        fix_digests(b, 2);
        CHECK(error_of(b) == "t.aft: chunk 0: step 0: layer 1 in a draft step (its block 0 is layer 2)");
        write_route_trace(dir / "m.aft", draft_trace({step_of(2, Phase::draft, {2})}), Compression::none);
        b = aff::test::read_all(dir / "m.aft");
        b[phase + 16] = 1;  // the second token decode
        fix_digests(b, 2);
        CHECK(error_of(b) == "t.aft: chunk 0: step 0: token 1: draft and other tokens in one step");
    }
}
