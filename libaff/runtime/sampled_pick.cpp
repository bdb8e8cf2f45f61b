// The sampled picks' host rule (sampled_pick.hpp). p is computed in double; the device's float
// account of the same rule lands on a neighbouring id only where a draw is within rounding of
// a running-sum boundary (tests/gpu/speculative_rows_test.cpp holds it to that).
#include "libaff/runtime/sampled_pick.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/greedy_pick.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace aff {
namespace {

// The first id whose running sum of w passes u·Σw, never an id of w 0; -1 when Σw is 0.
std::int32_t draw(std::span<const double> w, double u) {
    double total = 0.0;
    for (double x : w) total += x;
    if (!(total > 0.0)) return -1;
    const double target = u * total;
    double run = 0.0;
    std::int32_t last = -1;
    for (std::size_t i = 0; i < w.size(); ++i) {
        if (w[i] <= 0.0) continue;
        run += w[i];
        last = std::int32_t(i);
        if (run > target) return last;
    }
    return last;
}

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace

std::int32_t sampled_pick(std::span<const float> logits, std::size_t candidates, float temperature,
                          std::int32_t guess, std::span<const float> q, double u_accept, double u_draw) {
    if (!(temperature > 0.0f)) throw_internal("sampled_pick: temperature must be above 0");
    const std::size_t n = std::min(candidates, logits.size());
    if (n == 0) throw_internal("sampled_pick: no candidates");
    double max = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i)
        if (!std::isnan(logits[i])) max = std::max(max, double(logits[i]));
    if (max == -std::numeric_limits<double>::infinity()) return 0;  // every value NaN or -inf
    std::vector<double> p(n, 0.0);
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i)
        if (!std::isnan(logits[i])) total += p[i] = std::exp((double(logits[i]) - max) / double(temperature));
    for (double& x : p) x /= total;
    if (guess < 0) return draw(p, u_draw);
    if (q.size() != logits.size() || std::size_t(guess) >= q.size())
        throw_internal("sampled_pick: a guess outside its draft distribution");
    const double pg = std::size_t(guess) < n ? p[std::size_t(guess)] : 0.0;
    if (u_accept * double(q[std::size_t(guess)]) < pg) return guess;
    std::vector<double> r(n);
    for (std::size_t i = 0; i < n; ++i) r[i] = std::max(0.0, p[i] - double(q[i]));
    std::int32_t id = draw(r, u_draw);
    if (id < 0) {
        if (std::size_t(guess) < n) p[std::size_t(guess)] = 0.0;
        id = draw(p, u_draw);
    }
    return id >= 0 ? id : guess;
}

std::vector<std::int32_t> sampled_picks(std::span<const float> rows, std::size_t vocab, std::size_t candidates,
                                        std::span<const std::int32_t> tokens, const RowSampling& s) {
    if (vocab == 0 || rows.size() % vocab != 0) throw_internal("sampled_picks: rows that are not whole rows of the vocabulary");
    const std::size_t n = rows.size() / vocab;
    if (s.uniforms.size() != 2 * n) throw_internal("sampled_picks: not two draws a row");
    const std::size_t guesses = s.draft ? n - 1 : 0;
    if (guesses > 0 && n != tokens.size()) throw_internal("sampled_picks: draft rows without the call's guesses");
    std::vector<std::int32_t> picks(n);
    for (std::size_t r = 0; r < n; ++r) {
        const bool verifies = r < guesses;
        picks[r] = sampled_pick(rows.subspan(r * vocab, vocab), candidates, s.temperature,
                                verifies ? tokens[r + 1] : -1,
                                verifies ? s.draft->draft_distribution(r) : std::span<const float>{},
                                s.uniforms[2 * r], s.uniforms[2 * r + 1]);
    }
    return picks;
}

std::vector<std::int32_t> row_picks(std::span<const float> rows, std::size_t vocab, std::size_t candidates,
                                    std::span<const std::int32_t> tokens, const RowSampling* sampling) {
    return sampling ? sampled_picks(rows, vocab, candidates, tokens, *sampling) : greedy_picks(rows, vocab, candidates);
}

std::vector<double> positional_uniforms(std::uint64_t seed, std::int64_t first, std::size_t rows) {
    std::vector<double> u(2 * rows);
    const std::uint64_t key = splitmix64(seed);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t d = 0; d < 2; ++d) {
            const std::uint64_t counter = (std::uint64_t(first) + r) * 2 + d;
            u[2 * r + d] = double(splitmix64(key ^ splitmix64(counter)) >> 11) * (1.0 / 9007199254740992.0);
        }
    return u;
}

}  // namespace aff
