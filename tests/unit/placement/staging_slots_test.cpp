// Tests for StagingSlots (libaff/placement/staging_slots.hpp), the SSD tier's choice of staging
// slot: a dispatch's keys all get a slot, those already held keep theirs without a read, the
// others take free slots first and then the least recently used slot of a key the dispatch does
// not need; released slots are reused before any eviction; repeated keys and dispatches larger
// than the slots are refused without changing anything.
#include "libaff/core/error.hpp"
#include "libaff/placement/staging_slots.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <vector>

using aff::placement::ExpertKey;
using aff::placement::StagingSlots;

namespace {
std::vector<StagingSlots::Grant> take(StagingSlots& s, std::vector<ExpertKey> keys) { return s.acquire(keys); }
}  // namespace

TEST_CASE("a dispatch's keys fill free slots, then hit them", "[placement]") {
    StagingSlots s(4);
    const auto first = take(s, {10, 20, 30});
    REQUIRE(first.size() == 3);
    std::set<std::uint32_t> used;
    for (std::size_t i = 0; i < first.size(); ++i) {
        CHECK(first[i].key == std::vector<ExpertKey>{10, 20, 30}[i]);
        CHECK(first[i].read);
        CHECK_FALSE(first[i].evicts);
        CHECK(first[i].slot < 4);
        used.insert(first[i].slot);
        CHECK(s.slot_of(first[i].key) == first[i].slot);
        CHECK(s.held_by(first[i].slot) == first[i].key);
    }
    CHECK(used.size() == 3);
    CHECK(s.used() == 3);
    const auto again = take(s, {30, 10});
    CHECK_FALSE(again[0].read);
    CHECK_FALSE(again[1].read);
    CHECK(again[0].slot == first[2].slot);
    CHECK(again[1].slot == first[0].slot);
    CHECK(s.hits() == 2);
    CHECK(s.reads() == 3);
    CHECK_FALSE(s.slot_of(40).has_value());
}

TEST_CASE("a full set of slots evicts the least recently used key the dispatch does not need", "[placement]") {
    StagingSlots s(3);
    const auto a = take(s, {1, 2, 3});
    take(s, {1});  // 1 is now the most recent; 2 and 3 tie, 2's slot comes first
    const auto b = take(s, {4});
    REQUIRE(b.size() == 1);
    CHECK(b[0].read);
    CHECK(b[0].evicts);
    CHECK(b[0].evicted == 2);
    CHECK(b[0].slot == a[1].slot);
    CHECK_FALSE(s.slot_of(2).has_value());
    // The dispatch's own keys are never taken, even when they are the oldest: 3 is older than
    // 4 and 1, but the dispatch needs it, so 1 goes (4 is the newest).
    const auto c = take(s, {3, 5});
    CHECK_FALSE(c[0].read);
    CHECK(c[1].evicts);
    CHECK(c[1].evicted == 1);
    CHECK(s.used() == 3);
    // A dispatch that needs every slot: the held key stays, the others are replaced.
    const auto d = take(s, {6, 7, 5});
    CHECK(d[0].evicts);
    CHECK(d[1].evicts);
    CHECK_FALSE(d[2].read);
    const std::set<ExpertKey> gone{d[0].evicted, d[1].evicted};
    CHECK(gone == std::set<ExpertKey>{3, 4});
}

TEST_CASE("a released slot is reused before any eviction", "[placement]") {
    StagingSlots s(2);
    const auto a = take(s, {1, 2});
    s.release(1);
    s.release(99);  // not held: nothing happens
    CHECK(s.used() == 1);
    CHECK_FALSE(s.held_by(a[0].slot).has_value());
    const auto b = take(s, {3});
    CHECK(b[0].read);
    CHECK_FALSE(b[0].evicts);
    CHECK(b[0].slot == a[0].slot);
    CHECK(s.slot_of(2) == a[1].slot);
}

TEST_CASE("repeated keys and dispatches larger than the slots are refused, changing nothing", "[placement]") {
    StagingSlots s(2);
    take(s, {1});
    auto kind_of = [&](std::vector<ExpertKey> keys) {
        try {
            s.acquire(keys);
        } catch (const aff::Error& e) {
            return e.kind();
        }
        return aff::ErrorKind::internal;
    };
    CHECK(kind_of({2, 3, 4}) == aff::ErrorKind::usage);
    CHECK(kind_of({2, 2}) == aff::ErrorKind::usage);
    CHECK(kind_of({1, 1}) == aff::ErrorKind::usage);
    CHECK(s.used() == 1);
    CHECK(s.reads() == 1);
    CHECK(s.hits() == 0);
    CHECK(s.slot_of(1).has_value());
    CHECK(take(s, {}).empty());
}
