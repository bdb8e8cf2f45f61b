// Tests for the prefix cache (libaff/serve/prefix_cache.hpp) with stand-in states of a
// chosen size: the longest entry that prefixes a prompt wins, only within the length asked
// for and only at entry boundaries; the least recently used entry (by insertion or by
// match) is evicted first; the held bytes never exceed the capacity; a capacity of 0
// stores and matches nothing.
#include "libaff/serve/prefix_cache.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

namespace serve = aff::serve;

namespace {

struct FakeState final : serve::CachedState {
    explicit FakeState(std::size_t b, int t = 0) : size(b), tag(t) {}
    std::size_t bytes() const override { return size; }
    std::size_t size;
    int tag;
};

std::shared_ptr<const FakeState> state(std::size_t bytes, int tag = 0) {
    return std::make_shared<FakeState>(bytes, tag);
}

int tag_of(const serve::PrefixCache::Match& m) {
    return m.state ? static_cast<const FakeState&>(*m.state).tag : -1;
}

using Tokens = std::vector<std::int32_t>;

}  // namespace

TEST_CASE("prefix cache: the longest cached prefix of the prompt matches", "[serve]") {
    serve::PrefixCache cache(1 << 20);
    REQUIRE(cache.insert({1, 2, 3}, state(100, 3)));
    REQUIRE(cache.insert({1, 2, 3, 4, 5}, state(100, 5)));
    REQUIRE(cache.insert({1, 2, 9, 9, 9, 9}, state(100, 6)));
    const Tokens prompt = {1, 2, 3, 4, 5, 6, 7};

    auto m = cache.find(prompt, prompt.size() - 1);
    CHECK(m.tokens == 5);
    CHECK(tag_of(m) == 5);
    // Limited to 4 tokens: the 5-token entry is too long, the 3-token one fits.
    m = cache.find(prompt, 4);
    CHECK(m.tokens == 3);
    CHECK(tag_of(m) == 3);
    // Only whole entries: {1,2,9,...} shares two tokens with the prompt but is no prefix.
    m = cache.find(Tokens{1, 2, 9, 9, 8, 8}, 5);
    CHECK(m.tokens == 0);
    CHECK_FALSE(m.state);
    // An entry equal to the whole prompt matches when the limit allows it.
    m = cache.find(Tokens{1, 2, 3, 4, 5}, 5);
    CHECK(tag_of(m) == 5);
    // A prompt shorter than every entry matches nothing.
    CHECK_FALSE(cache.find(Tokens{1, 2}, 2).state);

    CHECK(cache.contains(Tokens{1, 2, 3}));
    CHECK_FALSE(cache.contains(Tokens{1, 2}));
    const serve::PrefixCacheStats& s = cache.stats();
    CHECK(s.entries == 3);
    CHECK(s.lookups == 5);
    CHECK(s.hits == 3);
    CHECK(s.hit_tokens == 5 + 3 + 5);
    CHECK(s.inserts == 3);
}

TEST_CASE("prefix cache: the least recently used entry is evicted first", "[serve]") {
    const std::size_t per = serve::PrefixCache::entry_bytes(2, FakeState(1000));
    serve::PrefixCache cache(3 * per);  // room for three 2-token entries of 1000 bytes
    REQUIRE(cache.insert({1, 1}, state(1000, 1)));
    REQUIRE(cache.insert({2, 2}, state(1000, 2)));
    REQUIRE(cache.insert({3, 3}, state(1000, 3)));
    CHECK(cache.stats().bytes == 3 * per);
    // Using {1,1} makes {2,2} the least recently used.
    CHECK(tag_of(cache.find(Tokens{1, 1, 7}, 2)) == 1);
    REQUIRE(cache.insert({4, 4}, state(1000, 4)));
    CHECK(cache.contains(Tokens{1, 1}));
    CHECK_FALSE(cache.contains(Tokens{2, 2}));
    CHECK(cache.contains(Tokens{3, 3}));
    CHECK(cache.contains(Tokens{4, 4}));
    CHECK(cache.stats().evictions == 1);
    CHECK(cache.stats().entries == 3);
    // A bigger entry pushes out as many old ones as it needs, oldest first: {3,3}, then {1,1}.
    REQUIRE(cache.insert({5, 5}, state(1000 + per, 5)));
    CHECK_FALSE(cache.contains(Tokens{3, 3}));
    CHECK_FALSE(cache.contains(Tokens{1, 1}));
    CHECK(cache.contains(Tokens{4, 4}));
    CHECK(cache.contains(Tokens{5, 5}));
    CHECK(cache.stats().evictions == 3);
}

TEST_CASE("prefix cache: held bytes stay within the capacity", "[serve]") {
    const std::size_t capacity = 50000;
    serve::PrefixCache cache(capacity);
    for (int i = 0; i < 200; ++i) {
        Tokens t(std::size_t(1 + i % 17), std::int32_t(i));
        cache.insert(t, state(std::size_t(1000 + (i * 7919) % 9000)));
        CHECK(cache.stats().bytes <= capacity);
    }
    CHECK(cache.stats().entries > 0);
    CHECK(cache.stats().inserts == 200);
    // Re-inserting the same tokens replaces the entry instead of adding a second one.
    const std::size_t entries = cache.stats().entries;
    REQUIRE(cache.contains(Tokens(1 + 199 % 17, 199)));  // the last one inserted
    cache.insert(Tokens(1 + 199 % 17, 199), state(500));
    CHECK(cache.stats().entries == entries);
    // An entry larger than the whole capacity is refused and evicts nothing.
    CHECK_FALSE(cache.insert({7, 7, 7}, state(capacity)));
    CHECK(cache.stats().entries == entries);
    CHECK_FALSE(cache.contains(Tokens{7, 7, 7}));
}

TEST_CASE("prefix cache: capacity 0 is off", "[serve]") {
    serve::PrefixCache cache(0);
    CHECK_FALSE(cache.enabled());
    CHECK_FALSE(cache.insert({1, 2, 3}, state(1)));
    CHECK_FALSE(cache.find(Tokens{1, 2, 3, 4}, 3).state);
    CHECK(cache.stats().entries == 0);
    CHECK(cache.stats().bytes == 0);
}
