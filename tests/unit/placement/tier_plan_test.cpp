// Tests for plan_tiers (libaff/placement/tier_plan.hpp): the slab gets what the GPU has left after
// the resident part and the headroom, the pool what the host has left after its reserve, the SSD the
// rest; exact counts on hand-computed cases (V4-Flash's 11,008 experts of 9,043,968 bytes on a 24 GB
// card), a cap below the free memory, everything fitting, and the two refusals.
#include "libaff/core/error.hpp"
#include "libaff/placement/tier_plan.hpp"

#include <catch2/catch.hpp>

using namespace aff::placement;

namespace {
constexpr std::uint64_t GiB = 1024 * kMiB;
}

TEST_CASE("V4-Flash on a 24 GB card with 64 GiB of RAM", "[placement]") {
    TierInputs in;
    in.gpu_free = 23 * GiB;             // what a 24 GB card reports free
    in.resident_bytes = 7 * GiB;        // dense FP8, head, state, activations
    in.host_available = 60 * GiB;
    in.slot_bytes = 9043968;            // 3 x 2048 x 4096 x 2.875 / 8, a multiple of 4096
    in.experts = 43 * 256;
    const TierPlan p = plan_tiers(in);
    // headroom: 3 % of 23 GiB (> 256 MiB); the slab gets 16 GiB less that.
    CHECK(p.headroom == (23 * GiB) / 100 * 3);
    CHECK(p.gpu_slots == std::int64_t((16 * GiB - p.headroom) / 9043968));
    CHECK(p.gpu_slots == 1817);
    CHECK(p.host_slots == std::int64_t((60 * GiB - kDefaultHostReserve) / 9043968));
    CHECK(p.host_slots == 6945);
    CHECK(p.ssd_experts == 11008 - 1817 - 6945);
    CHECK(p.slab_bytes == 1817ull * 9043968);
    const std::string line = p.describe(in);
    CHECK(line.find("1817 of 11008 on the GPU") != std::string::npos);
    CHECK(line.find("6945 in the pinned host pool") != std::string::npos);
    CHECK(line.find("2246 on the SSD") != std::string::npos);
}

TEST_CASE("a --gpu-mib cap, a given headroom and a given pool", "[placement]") {
    TierInputs in;
    in.gpu_free = 80 * GiB;
    in.gpu_cap = 10 * GiB;
    in.headroom = 512 * kMiB;
    in.resident_bytes = 2 * GiB;
    in.host_available = 100 * GiB;
    in.host_pool = 4 * GiB;
    in.slot_bytes = 64 * kMiB;
    in.experts = 1000;
    const TierPlan p = plan_tiers(in);
    CHECK(p.gpu_budget == 10 * GiB);
    CHECK(p.gpu_slots == (10 * 1024 - 2048 - 512) / 64);  // 120
    CHECK(p.host_slots == 64);
    CHECK(p.ssd_experts == 1000 - 120 - 64);
    CHECK(p.describe(in).find("cap") != std::string::npos);
}

TEST_CASE("a --gpu-expert-mib cap bounds the slab alone", "[placement]") {
    TierInputs in;
    in.gpu_free = 80 * GiB;
    in.headroom = 0;
    in.resident_bytes = 2 * GiB;
    in.host_available = 100 * GiB;
    in.slot_bytes = 64 * kMiB;
    in.experts = 1000;
    in.slab_cap = 3 * 64 * kMiB + 63 * kMiB;  // three slots and part of a fourth
    TierPlan p = plan_tiers(in);
    CHECK(p.gpu_slots == 3);
    CHECK(p.host_slots == 997);
    CHECK(p.ssd_experts == 0);
    CHECK(p.describe(in).find("--gpu-expert-mib 255 MiB") != std::string::npos);
    in.slab_cap = 0;  // every expert in the pool
    p = plan_tiers(in);
    CHECK(p.gpu_slots == 0);
    CHECK(p.host_slots == 1000);
    in.slab_cap = 1000 * GiB;  // above what the GPU has: the GPU decides
    p = plan_tiers(in);
    CHECK(p.gpu_slots == 1000);  // 78 GiB hold all 1000 slots of 64 MiB
    CHECK(p.host_slots == 0);
}

TEST_CASE("a model that fits leaves the pool and the SSD empty", "[placement]") {
    TierInputs in;
    in.gpu_free = 141 * GiB;
    in.resident_bytes = 9 * GiB;
    in.host_available = 128 * GiB;
    in.slot_bytes = 9043968;
    in.experts = 43 * 256;
    const TierPlan p = plan_tiers(in);
    CHECK(p.gpu_slots == 11008);
    CHECK(p.host_slots == 0);
    CHECK(p.ssd_experts == 0);
}

TEST_CASE("refusals name what is missing", "[placement]") {
    TierInputs in;
    in.gpu_free = 8 * GiB;
    in.resident_bytes = 8 * GiB;
    in.host_available = 16 * GiB;
    in.slot_bytes = 9043968;
    in.experts = 100;
    try {
        plan_tiers(in);
        FAIL("no error");
    } catch (const aff::Error& e) {
        CHECK(e.kind() == aff::ErrorKind::device);
        CHECK(std::string(e.what()).find("need 256 MiB more than the GPU offers (8192 MiB free)") != std::string::npos);
    }
    in.gpu_free = 16 * GiB;
    in.host_pool = 15 * GiB;
    try {
        plan_tiers(in);
        FAIL("no error");
    } catch (const aff::Error& e) {
        CHECK(e.kind() == aff::ErrorKind::usage);
        CHECK(std::string(e.what()).find("--host-pool-mib 15360 is more than the 14848 MiB") != std::string::npos);
    }
}

TEST_CASE("experts left on the SSD get one layer's worth of staging slots beside the pool", "[placement]") {
    // V4-Flash's 43 x 256 experts of 9043968 bytes (staging slots: the same, a multiple of 4096),
    // a 24 GB card's slab, a pool forced small by --host-pool-mib.
    TierInputs in;
    in.gpu_free = 23 * GiB;
    in.resident_bytes = 7 * GiB;
    in.host_available = 60 * GiB;
    in.host_pool = 4 * GiB;
    in.slot_bytes = 9043968;
    in.experts = 43 * 256;
    in.staging_max = 256;
    TierPlan p = plan_tiers(in);
    CHECK(p.gpu_slots == 1817);
    CHECK(p.host_slots == std::int64_t(4 * GiB / 9043968));  // 474
    CHECK(p.host_slots == 474);
    CHECK(p.ssd_experts == 11008 - 1817 - 474);
    CHECK(p.staging_slots == 256);
    CHECK(p.staging_bytes == 256ull * 9043968);
    CHECK(p.describe(in).find("8717 on the SSD (read into 256 pinned staging slots, 2208 MiB, when routed to)") !=
          std::string::npos);
    // Fewer experts on the SSD than a layer has: one staging slot each.
    in.experts = 1817 + 474 + 10;
    p = plan_tiers(in);
    CHECK(p.ssd_experts == 10);
    CHECK(p.staging_slots == 10);
    // Nothing on the SSD: no staging.
    in.experts = 1817 + 400;
    p = plan_tiers(in);
    CHECK(p.ssd_experts == 0);
    CHECK(p.staging_slots == 0);
    CHECK(p.describe(in).find("staging") == std::string::npos);
}

TEST_CASE("the pool gives up slots where the host cannot hold it and the staging slots", "[placement]") {
    TierInputs in;
    in.gpu_free = 80 * GiB;
    in.headroom = 0;
    in.resident_bytes = 2 * GiB;
    in.slab_cap = 0;
    in.host_available = 1536 * kMiB + 100 * kMiB;  // 100 MiB of room after the reserve
    in.slot_bytes = 10 * kMiB;
    in.staging_slot_bytes = 10 * kMiB;
    in.experts = 40;
    in.staging_max = 4;
    const TierPlan p = plan_tiers(in);
    // The pool alone would take all 10 slots of the room; with 4 staging slots it keeps 6.
    CHECK(p.host_slots == 6);
    CHECK(p.ssd_experts == 34);
    CHECK(p.staging_slots == 4);
    CHECK(p.pool_bytes + p.staging_bytes <= 100 * kMiB);
    // The staging alone does not fit: refused, naming the sizes.
    in.host_available = 1536 * kMiB + 30 * kMiB;
    try {
        plan_tiers(in);
        FAIL("no error");
    } catch (const aff::Error& e) {
        CHECK(e.kind() == aff::ErrorKind::usage);
        CHECK(std::string(e.what()).find("need 40 MiB of pinned staging slots, more than the 30 MiB") != std::string::npos);
    }
}
