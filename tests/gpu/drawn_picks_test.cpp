// Device test of the drawn picks (kernels/speculative_rows.hpp, GpuModel::forward_ids with
// RowDraws, the generation loop's sampled picks-only mode): a sampled generation whose one
// filter is the temperature brings back one id a row, its verify calls accepted on the device.
//   kernel: rows of several widths and cuts, plain and verifying guesses drawn from a q, against
//     the host rule (libaff/runtime/sampled_pick.hpp, double precision) on the same uniforms:
//     every id the host's but where a draw lies within rounding of a boundary (the host rule
//     with each draw moved by 1e-5 then finds it); NaN rows; and Pearson's chi-square of
//     40 000 verifying rows against p at a false-alarm rate of 1e-5, with a lying-q control.
//   model: two fresh states make the same calls, one through forward with the host rule over
//     its rows, one through forward_ids with draws: host q rows copied up, and an MTP chain's
//     q rows read where the chain left them (q_from_last_chain), on tiny-trained.
//   generation: MTP drafts at T 0.8 on tiny-trained through a GpuSequence, the device path
//     against the same sequence type whose picks are made on the host from its logits rows
//     (the drafter's q rows then copied back on demand): the same tokens, drafts accepted, the
//     same seed repeating itself.
#include "device_test.hpp"
#include "mtp_run.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/gpu_sequence.hpp"
#include "libaff/runtime/sampled_pick.hpp"
#include "kernels/speculative_rows.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

// softmax(x / t) over the first n ids, in floats (a draft's q rows).
std::vector<float> softmax_row(const std::vector<float>& x, float t, std::size_t n) {
    std::vector<float> q(x.size(), 0.0f);
    double max = -INFINITY, sum = 0;
    for (std::size_t i = 0; i < n; ++i) max = std::max(max, double(x[i]));
    std::vector<double> e(n);
    for (std::size_t i = 0; i < n; ++i) sum += e[i] = std::exp((double(x[i]) - max) / t);
    for (std::size_t i = 0; i < n; ++i) q[i] = float(e[i] / sum);
    return q;
}

int draw_from(const std::vector<float>& q, std::mt19937_64& r) {
    std::discrete_distribution<int> d(q.begin(), q.end());
    return d(r);
}

// Whether the host rule gives `id` for some draws within 1e-5 of (ua, ub).
bool explained(std::span<const float> row, std::size_t cols, float t, std::int32_t guess, std::span<const float> q,
               double ua, double ub, std::int32_t id) {
    for (const double da : {0.0, -1e-5, 1e-5})
        for (const double db : {0.0, -1e-5, 1e-5}) {
            const double a = std::clamp(ua + da, 0.0, 0.9999999), b = std::clamp(ub + db, 0.0, 0.9999999);
            if (aff::sampled_pick(row, cols, t, guess, q, a, b) == id) return true;
        }
    return false;
}

// `rows` rows of x [rows, stride]; the first `guesses` verify guess[r] against q row r.
std::vector<std::int32_t> device_picks(const std::vector<float>& x, int rows, int cols, int stride, float t,
                                       const std::vector<float>& u, const std::vector<std::int32_t>& guess,
                                       int guesses, const std::vector<float>& q) {
    aff::gpu::Buffer dx = to_device(x), du = to_device(u), dout = poisoned(std::size_t(rows), sizeof(int32_t));
    std::vector<std::int32_t> g = guess;
    if (g.empty()) g.push_back(0);
    std::vector<float> qq = q;
    if (qq.empty()) qq.push_back(0.0f);
    aff::gpu::Buffer dg = to_device(g), dq = to_device(qq);
    aff::gpu::Stream s;
    aff::gpu::speculative_rows(dx.as<float>(), rows, cols, stride, t, du.as<float>(), dg.as<int32_t>(), guesses,
                               guesses > 0 ? dq.as<float>() : nullptr, stride, dout.as<int32_t>(), s.handle());
    s.synchronize();
    return to_host<int32_t>(dout, std::size_t(rows));
}

void kernel_vs_host(const std::string& what, int cols, int candidates, float t, bool holes, std::vector<Row>& rows) {
    const int n = 64, guesses = 48;
    std::mt19937_64 r(std::uint64_t(cols) * 31 + std::uint64_t(candidates));
    std::vector<float> x, q, u;
    std::vector<std::int32_t> guess;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int i = 0; i < n; ++i) {
        std::vector<float> row = normal(std::size_t(cols), 0.0f, 2.0f);
        if (holes)
            for (int j = i % 5; j < cols; j += 9) row[std::size_t(j)] = nan;
        x.insert(x.end(), row.begin(), row.end());
        if (i < guesses) {
            // Some drafts near the target (mostly accepted), some far (the residual runs).
            std::vector<float> near = row;
            for (float& v : near) v = v == v ? v + (i % 2 ? 0.1f : 2.0f) * normal(1)[0] : -INFINITY;
            const std::vector<float> qr = softmax_row(near, 1.0f, std::size_t(cols));
            guess.push_back(draw_from(qr, r));
            q.insert(q.end(), qr.begin(), qr.end());
        }
    }
    const std::vector<double> ud = aff::positional_uniforms(std::uint64_t(cols), 0, std::size_t(n));
    for (double v : ud) u.push_back(float(v));
    const std::vector<std::int32_t> got = device_picks(x, n, candidates, cols, t, u, guess, guesses, q);
    std::size_t unexplained = 0, outside = 0, accepted = 0;
    for (int i = 0; i < n; ++i) {
        const std::span<const float> row = std::span(x).subspan(std::size_t(i) * cols, std::size_t(cols));
        const bool verifies = i < guesses;
        const std::int32_t g = verifies ? guess[std::size_t(i)] : -1;
        const std::span<const float> qr =
            verifies ? std::span<const float>(q).subspan(std::size_t(i) * cols, std::size_t(cols)) : std::span<const float>{};
        const std::int32_t id = got[std::size_t(i)];
        if (id < 0 || id >= candidates || (row[std::size_t(id)] != row[std::size_t(id)])) {
            ++outside;
            continue;
        }
        accepted += verifies && id == g;
        if (!explained(row, std::size_t(candidates), t, g, qr, u[2 * i], u[2 * i + 1], id)) ++unexplained;
    }
    add(rows, "drawn_picks", what + ": ids other than the host rule's beyond rounding of a draw", double(unexplained), 0.0);
    add(rows, "drawn_picks", what + ": ids outside the candidates or of no mass", double(outside), 0.0);
    add(rows, "drawn_picks", what + ": some guesses accepted, some rejected (" + std::to_string(accepted) + " of " +
                                 std::to_string(guesses) + ")",
        accepted > 0 && accepted < std::size_t(guesses) ? 0.0 : 1.0, 0.0);
}

// Pearson's chi-square of 40 000 device picks of one 8-id row, each verifying a guess drawn
// from q, against p (lie: the kernel told a flat q the guesses were not drawn from).
double kernel_chi_square(bool lie) {
    const int n = 40000, V = 8;
    const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -1.0f, 0.7f};
    const std::vector<float> qrow = {0.40f, 0.05f, 0.05f, 0.10f, 0.15f, 0.05f, 0.10f, 0.10f};
    const std::vector<float> flat(V, 1.0f / V);
    std::mt19937_64 r(99);
    std::vector<float> x, q, u;
    std::vector<std::int32_t> guess;
    for (int i = 0; i < n; ++i) {
        x.insert(x.end(), logits.begin(), logits.end());
        guess.push_back(draw_from(qrow, r));
        const std::vector<float>& told = lie ? flat : qrow;
        q.insert(q.end(), told.begin(), told.end());
    }
    for (double v : aff::positional_uniforms(lie ? 8 : 7, 0, std::size_t(n))) u.push_back(float(v));
    const std::vector<std::int32_t> got = device_picks(x, n, V, V, 1.0f, u, guess, n, q);
    std::vector<double> p(V);
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += p[std::size_t(i)] = std::exp(double(logits[std::size_t(i)]));
    std::vector<int> counts(V, 0);
    for (std::int32_t id : got) {
        if (id < 0 || id >= V) return INFINITY;
        ++counts[std::size_t(id)];
    }
    double chi = 0;
    for (int i = 0; i < V; ++i) {
        const double e = n * p[std::size_t(i)] / sum;
        chi += (counts[std::size_t(i)] - e) * (counts[std::size_t(i)] - e) / e;
    }
    return chi;
}

// A drafter that only reports host q rows (the model-level check hands them to forward_ids).
class HostRows final : public aff::Drafter {
public:
    HostRows(std::vector<float> q, std::size_t V) : q_(std::move(q)), V_(V) {}
    std::size_t max_tokens() const override { return q_.size() / V_; }
    std::vector<std::int32_t> propose(std::span<const std::int32_t>) override { return {}; }
    std::span<const float> draft_distribution(std::size_t i) const override {
        return std::span<const float>(q_).subspan(i * V_, V_);
    }

private:
    std::vector<float> q_;
    std::size_t V_;
};

void model_draws(const std::string& name, aff::gpu::GpuModel& g, bool has_mtp, std::vector<Row>& rows) {
    const int V = g.config().vocab_size;
    const float t = 0.8f;
    aff::gpu::GpuDecodeState a = g.new_state(), b = g.new_state();
    std::mt19937_64 r(5);
    long long differ = 0, calls = 0;
    std::int64_t pos = 0;
    // One call on both states: forward's rows under the host rule vs forward_ids' device draws.
    auto call = [&](const std::vector<std::int32_t>& toks, bool all_rows, const std::vector<float>& q, bool from_chain) {
        const std::size_t n_rows = all_rows ? toks.size() : 1;
        const std::vector<double> u = aff::positional_uniforms(3, pos + std::int64_t(toks.size() - n_rows) + 1, n_rows);
        pos += std::int64_t(toks.size());
        HostRows draft(q, std::size_t(V));
        const aff::RowSampling host{t, u, q.empty() ? nullptr : &draft};
        const std::vector<float> logits = g.forward(a, toks, all_rows);
        const std::vector<std::int32_t> want = aff::sampled_picks(logits, std::size_t(V), std::size_t(V), toks, host);
        aff::gpu::RowDraws d;
        d.temperature = t;
        d.uniforms = u;
        d.guesses = q.empty() ? 0 : toks.size() - 1;
        d.q_from_last_chain = from_chain;
        if (!from_chain) d.q = q;
        const std::vector<std::int32_t> got = g.forward_ids(b, toks, all_rows, std::size_t(V), &d);
        ++calls;
        if (got.size() != want.size()) return differ += 1000;
        for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
        return differ;
    };
    const std::vector<std::int32_t> prompt = random_tokens(9, V);
    call(prompt, false, {}, false);
    g.set_gemv_calls(false);
    for (int s = 0; s < 4; ++s) call(random_tokens(1, V), false, {}, false);  // decode steps: the graph
    g.set_gemv_calls(true);
    for (int s = 0; s < 3; ++s) {  // verify calls against host q rows
        std::vector<std::int32_t> toks{random_tokens(1, V)[0]};
        std::vector<float> q;
        for (int j = 0; j < 3; ++j) {
            const std::vector<float> qr = softmax_row(normal(std::size_t(V), 0.0f, 3.0f), 1.0f, std::size_t(V));
            toks.push_back(draw_from(qr, r));
            q.insert(q.end(), qr.begin(), qr.end());
        }
        call(toks, true, q, false);
    }
    if (has_mtp) {  // verify calls against an MTP chain's q rows left on the device
        for (int s = 0; s < 3; ++s) {
            aff::gpu::GpuDecodeState m = g.new_mtp_state();
            const int n = 4;
            g.mtp_restart(m, pos - n);
            g.keep_streams(m, pos - n, 0, n);  // the last call's streams: both states ran the same tokens
            const std::vector<std::int32_t> next = random_tokens(n, V);
            const std::vector<double> cu = aff::positional_uniforms(77 + s, 0, 3);
            const std::vector<double> chain_u = {cu[0], cu[2], cu[4]};
            const std::vector<std::int32_t> guesses = g.mtp_draft_sampled(m, next, 3, t, chain_u, nullptr);
            const std::vector<float> q = g.last_chain_q(3);
            std::vector<std::int32_t> toks{next.back()};
            toks.insert(toks.end(), guesses.begin(), guesses.end());
            call(toks, true, q, true);
        }
    }
    g.set_gemv_calls(false);
    add(rows, "drawn_picks",
        name + ": " + std::to_string(calls) + " calls, device draws vs the host rule over forward's rows, differing",
        double(differ), 0.0);
    // Draws that do not fit the rows are refused.
    const double refused = usage_error([&] {
        aff::gpu::GpuDecodeState s = g.new_state();
        const std::int32_t one[1] = {0};
        const double u1[1] = {0.5};
        aff::gpu::RowDraws d;
        d.uniforms = u1;
        g.forward_ids(s, one, false, std::size_t(V), &d);
    });
    add(rows, "drawn_picks", name + ": one draw for a row (two needed) refused as a usage error", refused, 0.0);
}

// The sequence behind, its forward_ids the host default (Sequence::forward_ids: the host rule
// over forward's rows), everything else the GPU sequence's.
class HostPickedSequence final : public aff::Sequence {
public:
    explicit HostPickedSequence(aff::Sequence& inner) : inner_(inner) {}
    std::string describe() const override { return inner_.describe(); }
    bool on_gpu() const override { return true; }
    std::size_t vocab_size() const override { return inner_.vocab_size(); }
    std::int64_t position() const override { return inner_.position(); }
    void reset() override { inner_.reset(); }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override {
        return inner_.forward(tokens, all_logits);
    }
    void set_rewind_depth(std::size_t tokens) override { inner_.set_rewind_depth(tokens); }
    std::size_t rewind_depth() const override { return inner_.rewind_depth(); }
    std::int64_t rewind_floor() const override { return inner_.rewind_floor(); }

private:
    void rewind_to(std::int64_t position) override { inner_.rewind(position); }
    aff::Sequence& inner_;
};

void generation_draws(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const int V = cpu.config().vocab_size;
    for (int p = 0; p < 2; ++p) {
        aff::GenerateOptions opt;
        opt.prompt = random_tokens(7 + 8 * p, V);
        opt.max_new_tokens = 40;
        opt.sampling.temperature = 0.8f;
        opt.sampling.seed = 100 + std::uint64_t(p);
        auto run = [&](bool host_picks, aff::GenerateStats& stats) {
            auto seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
            auto drafter = gpu_drafter(*seq, 3);
            if (!host_picks) return generated(*seq, opt, drafter.get(), false, &stats);
            HostPickedSequence host(*seq);
            return generated(host, opt, drafter.get(), false, &stats);
        };
        aff::GenerateStats dev, dev2, host;
        const std::vector<std::int32_t> a = run(false, dev), b = run(false, dev2), c = run(true, host);
        long long differ = a.size() == c.size() ? 0 : 1000, again = a.size() == b.size() ? 0 : 1000;
        for (std::size_t i = 0; i < std::min(a.size(), c.size()); ++i) differ += a[i] != c[i];
        for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) again += a[i] != b[i];
        const std::string what = "tiny-trained prompt " + std::to_string(p) + " MTP k=3 T 0.8 (" +
                                 std::to_string(dev.verify_calls) + " verify calls, " +
                                 std::to_string(dev.accepted_tokens) + " of " + std::to_string(dev.drafted_tokens) +
                                 " accepted)";
        add(rows, "drawn_picks", what + ": device-accepted tokens vs host-accepted on the same logits, differing",
            double(differ), 0.0);
        add(rows, "drawn_picks", what + ": the same seed again, tokens differing", double(again), 0.0);
        add(rows, "drawn_picks", what + ": drafts accepted", dev.accepted_tokens > 0 ? 0.0 : 1.0, 0.0);
    }
}

}  // namespace

AFF_DEVICE_TEST("drawn_picks") {
    for (const int cols : {7, 1031, 129280})
        for (const float t : {0.7f, 1.3f}) {
            const std::string w = std::to_string(cols) + " ids, T " + std::to_string(t).substr(0, 3);
            kernel_vs_host(w, cols, cols, t, false, rows);
            if (cols > 7) kernel_vs_host(w + ", cut to " + std::to_string(cols / 2), cols, cols / 2, t, false, rows);
        }
    kernel_vs_host("1031 ids with NaN entries", 1031, 1031, 1.0f, true, rows);
    // 8 cells, 7 degrees of freedom: P(chi-square > 33.38) = 1e-5 when the picks follow p.
    const double honest = kernel_chi_square(false), lying = kernel_chi_square(true);
    add(rows, "drawn_picks", "40000 verifying rows: chi-square against p (1e-5 false-alarm bound 33.38)", honest, 33.38);
    add(rows, "drawn_picks", "control, q not the one drawn from: chi-square above 10 x 33.38 (value: 333.8 / chi)",
        lying > 0 ? 333.8 / lying : INFINITY, 1.0);
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a", "tiny-trained"}) {
        try {
            const std::string dir = test_data() + "/models/" + name;
            auto cpu = aff::Model::load(dir, pool);
            const aff::Checkpoint ck(dir);
            const bool mtp = std::string(name) == "tiny-trained";
            {
                aff::gpu::GpuModel g(*cpu, &ck, {});
                model_draws(name, g, mtp, rows);
            }
            if (mtp) generation_draws(*cpu, ck, rows);
        } catch (const std::exception& e) {
            rows.push_back({"drawn_picks", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
}
