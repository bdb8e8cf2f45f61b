// Tests for libaff/runtime: the generation loop on a tiny fixture, the logits file and
// token-list parsing.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/logits_file.hpp"
#include "libaff/runtime/token_list.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {
const std::string kTiny = std::string(AFF_TEST_DATA) + "/models/tiny-a";

struct Recorded {
    std::vector<std::int32_t> tokens;
    std::vector<std::int64_t> positions;
    std::vector<std::vector<float>> logits;
};

Recorded run(const aff::Model& model, const aff::GenerateOptions& opt, bool with_logits) {
    Recorded r;
    aff::DecodeState state = model.new_state();
    aff::GenerateCallbacks cb;
    cb.on_token = [&](std::int32_t t) { r.tokens.push_back(t); };
    if (with_logits)
        cb.on_logits = [&](std::int64_t pos, std::int32_t, std::span<const float> l) {
            r.positions.push_back(pos);
            r.logits.emplace_back(l.begin(), l.end());
        };
    aff::generate(model, state, opt, cb);
    return r;
}
}  // namespace

TEST_CASE("forced tokens give the logits of one prefill over prompt and continuation", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kTiny, pool);
    aff::GenerateOptions opt;
    opt.prompt = {0, 5, 9, 33, 17, 80, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    opt.forced = {42, 7, 100, 3, 250};
    const Recorded r = run(*model, opt, true);
    CHECK(r.tokens == opt.forced);
    REQUIRE(r.logits.size() == opt.prompt.size() + opt.forced.size());
    for (std::size_t i = 0; i < r.positions.size(); ++i) CHECK(r.positions[i] == static_cast<std::int64_t>(i));

    std::vector<std::int32_t> all = opt.prompt;
    all.insert(all.end(), opt.forced.begin(), opt.forced.end());
    aff::DecodeState state = model->new_state();
    const std::vector<float> ref = model->forward(state, all, true);
    const int v = model->config().vocab_size;
    float max_abs = 0, max_diff = 0;
    for (std::size_t i = 0; i < all.size(); ++i)
        for (int j = 0; j < v; ++j) {
            max_abs = std::max(max_abs, std::fabs(ref[i * v + j]));
            max_diff = std::max(max_diff, std::fabs(ref[i * v + j] - r.logits[i][j]));
        }
    CHECK(max_abs > 0.1f);
    CHECK(max_diff <= 1e-4f * max_abs);
}

TEST_CASE("greedy generation follows the argmax and seeded sampling repeats", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kTiny, pool);
    aff::GenerateOptions opt;
    opt.prompt = {0, 11, 22, 33};
    opt.max_new_tokens = 6;
    opt.ignore_eos = true;
    opt.sampling.temperature = 0;
    const Recorded greedy = run(*model, opt, true);
    REQUIRE(greedy.tokens.size() == 6);
    // Row prompt.size()-1+i predicts generated token i.
    for (std::size_t i = 0; i < greedy.tokens.size(); ++i) {
        const auto& row = greedy.logits[opt.prompt.size() - 1 + i];
        const auto best = std::max_element(row.begin(), row.end()) - row.begin();
        CHECK(greedy.tokens[i] == best);
    }
    opt.sampling.temperature = 1.0f;
    opt.sampling.seed = 7;
    const Recorded a = run(*model, opt, false), b = run(*model, opt, false);
    CHECK(a.tokens == b.tokens);
    CHECK(a.tokens.size() == 6);
}

TEST_CASE("generation refuses tokens outside the vocabulary and an empty prompt", "[runtime]") {
    aff::ThreadPool pool(1);
    auto model = aff::Model::load(kTiny, pool);
    aff::DecodeState state = model->new_state();
    aff::GenerateOptions opt;
    CHECK_THROWS_WITH(aff::generate(*model, state, opt, {}), "the prompt is empty");
    opt.prompt = {0, 256};
    CHECK_THROWS_WITH(aff::generate(*model, state, opt, {}), "prompt token 256 is outside the model's vocabulary (0..255)");
    opt.prompt = {0};
    opt.forced = {-1};
    CHECK_THROWS_WITH(aff::generate(*model, state, opt, {}), "forced token -1 is outside the model's vocabulary (0..255)");
}

TEST_CASE("a logits file reads back what was written and rejects damage", "[runtime]") {
    const fs::path dir = fs::temp_directory_path() / ("aff-logits-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / "l.bin").string();
    {
        aff::LogitsFileWriter w(path, 3);
        const float a[3] = {1.5f, -2.0f, 0.25f}, b[3] = {0, 1, 2};
        w.add(0, 7, a);
        w.add(1, 9, b);
        w.commit();
    }
    const auto recs = aff::read_logits_file(path);
    REQUIRE(recs.size() == 2);
    CHECK(recs[0].position == 0);
    CHECK(recs[0].token == 7);
    CHECK(recs[0].logits == std::vector<float>{1.5f, -2.0f, 0.25f});
    CHECK(recs[1].token == 9);
    CHECK(fs::file_size(path) == 32 + 2 * (16 + 12));

    fs::resize_file(path, fs::file_size(path) - 4);
    CHECK_THROWS_WITH(aff::read_logits_file(path), Catch::EndsWith("size 84 does not match 2 records of vocab 3"));
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.write("XFF", 3);
    }
    CHECK_THROWS_WITH(aff::read_logits_file(path), Catch::EndsWith("not a logits file (wrong magic)"));
    fs::remove_all(dir);
}

TEST_CASE("token lists take commas and spaces and name a bad item", "[runtime]") {
    CHECK(aff::parse_token_list("0,17, 42\n5") == std::vector<std::int32_t>{0, 17, 42, 5});
    CHECK(aff::parse_token_list("  ").empty());
    CHECK_THROWS_WITH(aff::parse_token_list("1,x2"), "invalid token id 'x2' (expected a non-negative integer)");
    CHECK_THROWS_WITH(aff::parse_token_list("-3"), "invalid token id '-3' (expected a non-negative integer)");
    CHECK_THROWS_WITH(aff::parse_token_list("99999999999"), Catch::Contains("99999999999"));
}
