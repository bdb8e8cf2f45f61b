// Tests for the MTP draft layer (model doc §5.1). transformers drops mtp.* weights, so
// there is no oracle: these tests check what must hold by construction. The draft for
// position p+2 uses the trunk streams of position p and token p+1; fed in one chunk, in
// odd chunks or step by step beside decode, it gives the same logits; it depends on
// both inputs; a checkpoint without MTP says so.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace {
const std::string models = std::string(AFF_TEST_DATA) + "/models";

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double m = 0, d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        m = std::max(m, double(std::fabs(b[i])));
        d = std::max(d, double(std::fabs(a[i] - b[i])));
    }
    return d / m;
}

std::vector<std::int32_t> prompt(int n) {
    std::vector<std::int32_t> t{0};
    for (int i = 1; i < n; ++i) t.push_back(2 + (i * 37 + i * i * 11) % 250);
    return t;
}
}  // namespace

TEST_CASE("MTP drafts agree fed whole, in chunks, and step by step beside decode", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(models + "/tiny-a-fp8", pool);
    REQUIRE(model->has_mtp());
    const int hc = model->config().hc_mult, D = model->config().hidden_size;
    const std::size_t per = std::size_t(hc) * D;
    const auto tokens = prompt(60);
    const int S = int(tokens.size()), V = model->config().vocab_size;

    // Whole: one prefill, then MTP over positions 0..S-2 with the tokens that follow.
    aff::DecodeState whole = model->new_state();
    std::vector<float> streams;
    model->forward(whole, tokens, false, &streams);
    const std::vector<float> all =
        model->mtp_forward(whole, std::span(streams).first((S - 1) * per), std::span(tokens).subspan(1));
    REQUIRE(all.size() == std::size_t(S - 1) * V);

    // Odd chunks of the MTP input.
    aff::DecodeState chunked = model->new_state();
    std::vector<float> parts;
    int at = 0;
    for (int c : {5, 17, 1, 36}) {
        auto p = model->mtp_forward(chunked, std::span(streams).subspan(at * per, c * per),
                                    std::span(tokens).subspan(at + 1, c));
        parts.insert(parts.end(), p.begin(), p.end());
        at += c;
    }
    REQUIRE(at == S - 1);
    CHECK(max_rel_diff(parts, all) < 1e-4);

    // Step by step: decode one token, draft from its streams once the next token is known.
    aff::DecodeState step = model->new_state();
    std::vector<float> stepped;
    for (int p = 0; p + 1 < S; ++p) {
        std::vector<float> s;
        model->forward(step, std::span(&tokens[p], 1), false, &s);
        auto d = model->mtp_forward(step, s, std::span(&tokens[p + 1], 1));
        stepped.insert(stepped.end(), d.begin(), d.end());
    }
    CHECK(max_rel_diff(stepped, all) < 1e-4);
}

TEST_CASE("an MTP draft depends on the trunk streams and on the next token", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(models + "/tiny-a-fp8", pool);
    const auto tokens = prompt(20);
    aff::DecodeState st = model->new_state();
    std::vector<float> streams;
    model->forward(st, tokens, false, &streams);
    const std::size_t per = std::size_t(model->config().hc_mult) * model->config().hidden_size;
    std::vector<float> last(streams.end() - per, streams.end());
    auto draft = [&](const std::vector<float>& h, std::int32_t next) {
        aff::DecodeState s = model->new_state();
        return model->mtp_forward(s, h, std::span(&next, 1));
    };
    const auto base = draft(last, 7);
    CHECK(max_rel_diff(draft(last, 7), base) == 0.0);  // deterministic
    CHECK(max_rel_diff(draft(last, 8), base) > 1e-3);
    std::vector<float> other = last;
    for (float& v : other) v *= -1.0f;
    CHECK(max_rel_diff(draft(other, 7), base) > 1e-3);
    for (float v : base) REQUIRE(std::isfinite(v));
}

TEST_CASE("a checkpoint saved by transformers has no MTP layer, and drafting says so", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(models + "/tiny-a", pool);
    CHECK(!model->has_mtp());
    aff::DecodeState st = model->new_state();
    std::vector<float> h(std::size_t(model->config().hc_mult) * model->config().hidden_size);
    std::int32_t next = 3;
    try {
        model->mtp_forward(st, h, std::span(&next, 1));
        FAIL("no error");
    } catch (const aff::Error& e) {
        CHECK(std::string(e.what()) == "the checkpoint has no MTP layer");
    }
}
