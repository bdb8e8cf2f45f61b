// compare_forward (forward_compare.hpp): the CPU reference run first with its choices'
// margins recorded, a near-tie-free prompt picked, then the GPU run on the same tokens.
#include "forward_compare.hpp"

#include "libaff/core/hash.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <span>

namespace aff::gpu::test {

namespace {

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// The CPU side of one prompt: its tokens, every call's logits, and the first position whose
// choice (router, indexer or the logits' argmax) is near-tied (= positions when none is).
struct Reference {
    std::vector<std::int32_t> prompt, decoded;   // decoded: the tokens fed to the decode steps
    std::vector<std::vector<float>> logits;      // per call: chunks, then decode steps
    int positions = 0;
    int first_tie = 0;
    double smallest_margin = std::numeric_limits<double>::infinity();
};

Reference run_reference(const aff::Model& cpu, const ForwardCase& c, std::uint64_t seed) {
    const int V = cpu.config().vocab_size;
    Reference r;
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int> tok(0, V - 1);
    r.prompt.resize(c.prompt_len);
    for (auto& t : r.prompt) t = tok(gen);
    aff::SelectionMargins margins;
    aff::DecodeState st = cpu.new_state();
    st.margins = &margins;
    int at = 0;
    for (const int n : c.chunks) {
        r.logits.push_back(cpu.forward(st, std::span<const std::int32_t>(r.prompt.data() + at, n), true));
        at += n;
    }
    std::int32_t next = argmax(&r.logits.back()[r.logits.back().size() - V], V);
    for (int step = 0; step < c.decode_steps; ++step) {
        r.decoded.push_back(next);
        const std::int32_t one[1] = {next};
        r.logits.push_back(cpu.forward(st, one, false));
        next = argmax(r.logits.back().data(), V);
    }
    // Each position's smallest margin: its routing and indexer choices, and its logits' top two.
    std::vector<double> m(std::size_t(c.prompt_len + c.decode_steps), std::numeric_limits<double>::infinity());
    for (std::size_t p = 0; p < m.size() && p < margins.by_position.size(); ++p) m[p] = margins.by_position[p];
    std::size_t p = 0;
    for (const auto& l : r.logits)
        for (std::size_t row = 0; row * V < l.size(); ++row, ++p) {
            std::vector<float> top(l.begin() + row * V, l.begin() + (row + 1) * V);
            std::nth_element(top.begin(), top.begin() + 1, top.end(), std::greater<float>());
            const double scale = std::max(std::fabs(double(top[0])), std::fabs(double(top[1])));
            if (scale > 0) m[p] = std::min(m[p], (double(top[0]) - top[1]) / scale);
        }
    r.positions = int(m.size());
    r.first_tie = r.positions;
    for (int q = 0; q < r.positions; ++q) {
        r.smallest_margin = std::min(r.smallest_margin, m[q]);
        if (m[q] < kNearTie && r.first_tie == r.positions) r.first_tie = q;
    }
    return r;
}

}  // namespace

void compare_forward(const aff::Model& cpu, GpuModel& gpu, const ForwardCase& c, std::vector<Row>& rows) {
    const int V = cpu.config().vocab_size;
    std::string split;
    for (const int n : c.chunks) split += (split.empty() ? "" : "+") + std::to_string(n);
    const std::string what =
        c.name + " prefill " + split + c.tag + " + decode " + std::to_string(c.decode_steps);

    // The prompt: the first seed whose CPU run has no near-tie (exact path), else the latest tie.
    const std::uint64_t seed = aff::xxh3_64(what.data(), what.size());
    Reference ref = run_reference(cpu, c, seed);
    int attempt = 0;
    for (int a = 1; c.exact && ref.first_tie < ref.positions && a < kPromptAttempts; ++a) {
        Reference next = run_reference(cpu, c, seed + a);
        if (next.first_tie > ref.first_tie) {
            ref = std::move(next);
            attempt = a;
        }
    }
    const int compared = c.exact ? ref.first_tie : ref.positions;

    aff::gpu::GpuDecodeState gs = gpu.new_state();
    std::vector<float> all_want, all_got;
    int mismatches = 0, position = 0;
    auto record = [&](const std::vector<float>& w, const std::vector<float>& g) {
        for (std::size_t r = 0; r * V < w.size(); ++r, ++position) {
            if (position >= compared) continue;
            const bool same_size = g.size() == w.size();
            mismatches += (!same_size || argmax(&w[r * V], V) != argmax(&g[r * V], V)) ? 1 : 0;
            all_want.insert(all_want.end(), w.begin() + r * V, w.begin() + (r + 1) * V);
            if (same_size) all_got.insert(all_got.end(), g.begin() + r * V, g.begin() + (r + 1) * V);
        }
    };
    std::size_t call = 0;
    int at = 0;
    for (const int n : c.chunks) {
        record(ref.logits[call++], gpu.forward(gs, std::span<const std::int32_t>(ref.prompt.data() + at, n), true));
        at += n;
    }
    for (const std::int32_t t : ref.decoded) {
        const std::int32_t one[1] = {t};
        record(ref.logits[call++], gpu.forward(gs, one, false));
    }
    double max_abs = all_got.size() == all_want.size() ? 0.0 : INFINITY;
    for (std::size_t i = 0; i < all_want.size() && i < all_got.size(); ++i)
        max_abs = std::max(max_abs, std::fabs(double(all_want[i]) - all_got[i]));
    const double err = nmse(all_got, all_want);

    const std::string of = compared == ref.positions
                               ? std::to_string(ref.positions)
                               : std::to_string(compared) + " (of " + std::to_string(ref.positions) + ")";
    add(rows, c.family, what + ": logits nmse", err, c.max_nmse);
    add(rows, c.family, what + ": max |logit diff|", max_abs, c.max_abs);
    add(rows, c.family, what + ": argmax mismatches of " + of, mismatches,
        std::floor(c.max_mismatch_fraction * compared));
    if (compared < ref.positions)
        add(rows, c.family, what + ": positions after the first near-tie of " + std::to_string(kPromptAttempts) +
                                " prompts", ref.positions - compared, std::floor(ref.positions / 2.0));
    std::printf("%s %s: prompt %d (seed %016llx + %d), smallest CPU choice margin %.3e, positions compared %d of %d, "
                "max |diff| %.3e, nmse %.3e\n",
                c.family.c_str(), what.c_str(), c.prompt_len, static_cast<unsigned long long>(seed), attempt,
                ref.smallest_margin, compared, ref.positions, max_abs, err);
}

}  // namespace aff::gpu::test
