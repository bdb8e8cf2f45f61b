// Tests for Sequence::snapshot/restore on the CPU reference (the server's prefix
// cache, libaff/serve/prefix_cache.hpp, keeps these): a restored snapshot continues bit for
// bit as the sequence it was taken from, whatever ran on the backend in between; restoring
// after a prefill of the prefix and then prefilling the suffix gives the logits of a full
// prefill split at the same point, bit for bit, and those of one unsplit prefill bit for bit
// too (the CPU forward computes each token's row alone, in an order that does not depend
// on how the tokens are chunked; this test is what holds the server to that). A snapshot
// costs what the state holds, which grows with the compressed entries.
#include "libaff/runtime/open_sequence.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace {

std::unique_ptr<aff::Sequence> cpu_backend(const aff::Model& model) {
    aff::BackendOptions opt;
    opt.gpus = 0;
    return aff::open_sequence(model, {}, opt, {});
}

std::vector<std::int32_t> prompt_of(int n, int vocab) {
    std::vector<std::int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(std::int32_t((i * 7919 + 13) % vocab));
    return t;
}

}  // namespace

TEST_CASE("a restored CPU snapshot continues bit for bit as the sequence it was taken from", "[runtime]") {
    aff::ThreadPool pool(2);
    for (const char* name : {"tiny-a", "tiny-b", "tiny-c"}) {
        INFO(name);
        auto model = aff::Model::load(std::string(AFF_TEST_DATA) + "/models/" + name, pool);
        auto backend = cpu_backend(*model);
        REQUIRE(backend->can_snapshot());
        const int V = model->config().vocab_size;
        // 37 tokens: past several CSA (ratio 4) and HCA windows of the fixtures, mid-window.
        const std::vector<std::int32_t> all = prompt_of(61, V);
        const std::span<const std::int32_t> head = std::span(all).first(37), tail = std::span(all).subspan(37);

        backend->reset();
        backend->forward(head, false);
        const auto snap = backend->snapshot();
        CHECK(snap->position() == 37);
        const std::vector<float> straight = backend->forward(tail, true);

        // Something else runs on the backend meanwhile (another request).
        backend->reset();
        backend->forward(prompt_of(50, V), false);
        backend->restore(*snap);
        CHECK(backend->position() == 37);
        const std::vector<float> restored = backend->forward(tail, true);
        CHECK(restored == straight);
        // The snapshot was not consumed: it restores again to the same result.
        backend->restore(*snap);
        CHECK(backend->forward(tail, true) == straight);

        // A split prefill against one whole prefill: the last token's logits are identical.
        backend->reset();
        const std::vector<float> whole = backend->forward(all, false);
        backend->restore(*snap);
        CHECK(backend->forward(tail, false) == whole);
        // And split one token before the end, as the server does for its snapshot.
        backend->reset();
        backend->forward(std::span(all).first(all.size() - 1), false);
        CHECK(backend->forward(std::span(all).last(1), false) == whole);
    }
}

TEST_CASE("a CPU snapshot's size follows the state it copies", "[runtime]") {
    aff::ThreadPool pool(1);
    auto model = aff::Model::load(std::string(AFF_TEST_DATA) + "/models/tiny-b", pool);
    auto backend = cpu_backend(*model);
    const aff::ModelConfig& c = model->config();
    const auto empty = backend->snapshot();
    // At least every layer's ring [W, Dh] of floats.
    CHECK(empty->bytes() >= std::size_t(c.num_layers) * c.sliding_window * c.head_dim * sizeof(float));
    backend->forward(prompt_of(64, c.vocab_size), false);
    const auto full = backend->snapshot();
    CHECK(full->position() == 64);
    CHECK(full->bytes() > empty->bytes());  // compressed entries were emitted
}
