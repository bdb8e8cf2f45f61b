// Benchmark: GPU hit rate of every placement policy on the synthetic trace families
// (libaff/trace/synthetic.hpp) at four GPU sizes, and on recorded traces given as
// arguments, against Belady's MIN, the bound; the goal is heat within 5 points of
// Belady at every size. Each family's replayed trace (seed 1) starts from a profile fitted
// on another run of the same synthetic model (seed 2), as a real engine starts from a
// profile of earlier traffic. Replays use the placement engine and policies of
// libaff/placement (libaff/trace/replay.cpp).
//   placement_bench [SEQUENCES] [HOST_GIB] [TRACE...]
// A recorded trace is replayed with 1/8, 1/4, 1/2 and 3/4 of its experts on the GPU and the
// rest in the host pool, from no profile (key order), as `aff-trace replay` does.
// Besides the policies it prints where Belady's lead comes from:
//   oracle     (synthetic only) the distribution oracle, synthetic_oracle(): the bound for
//              any online policy, since it knows the generator's probabilities, not its draws;
//   heat+adm   heat with Belady's admission test (admit iff needed before heat's victim);
//   heat+evict heat's admission test against Belady's victim (the resident needed last);
//   hindsight  static placement by the replayed trace's own counts.
// None of these is an online policy; they bound what a better heat could reach.
#include "libaff/trace/profile_from_trace.hpp"
#include "libaff/trace/replay.hpp"
#include "libaff/trace/synthetic.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace aff;

const std::vector<std::string> kPolicies = {"static", "demand", "lru", "lfu", "heat", "belady"};

double rate(const trace::DispatchList& list, std::uint64_t gpu, std::uint64_t host, const std::string& policy,
            const trace::ReplayOptions& o) {
    return 100 * trace::replay_one(list, gpu, host, policy, o).gpu_hit_rate();
}

void header() {
    std::printf("%10s", "gpu");
    for (const auto& name : kPolicies) std::printf(" %8s", name.c_str());
    std::printf(" %8s %8s %8s %8s %8s %8s %8s %8s\n", "heat-bel", "oracle", "bel-orc", "heat-orc", "heat+adm", "heat+evi", "hindsigh", "ms/tok*");
}

// One row: every policy, heat's gap, the oracle (negative: none) and the diagnostics.
void row(const char* size, const trace::DispatchList& list, std::uint64_t gpu, std::uint64_t host, const trace::ReplayOptions& o,
         const trace::ReplayOptions& hindsight, double oracle) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<double> r;
    double heat_ms = 0;
    for (const auto& name : kPolicies) {
        const trace::ReplayResult res = trace::replay_one(list, gpu, host, name, o);
        r.push_back(100 * res.gpu_hit_rate());
        if (name == "heat") heat_ms = 1e3 * res.seconds_per_token(o.bandwidths);
    }
    trace::ReplayOptions adm = o, evi = o;
    adm.heat.oracle = placement::HeatOracle::admission;
    evi.heat.oracle = placement::HeatOracle::eviction;
    const double heat_adm = rate(list, gpu, host, "heat", adm), heat_evi = rate(list, gpu, host, "heat", evi);
    const double h = rate(list, gpu, host, "static", hindsight);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%10s", size);
    for (double x : r) std::printf(" %7.2f%%", x);
    std::printf(" %+8.2f", r[4] - r[5]);
    if (oracle >= 0) std::printf(" %7.2f%% %+8.2f %+8.2f", oracle, r[5] - oracle, r[4] - oracle);
    else std::printf(" %8s %8s %8s", "-", "-", "-");
    std::printf(" %7.2f%% %7.2f%% %7.2f%% %8.3f  (%.1f s)\n", heat_adm, heat_evi, h, heat_ms, s);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint32_t sequences = argc > 1 ? std::uint32_t(std::stoul(argv[1])) : 8;
    const double host_gib = argc > 2 ? std::stod(argv[2]) : 32;
    const trace::ReplayOptions base;
    std::printf("placement_bench: %u sequences a trace, host pool %.0f GiB, heat defaults (half-life %.0f steps, token weight %.2f, "
                "hysteresis %.2f, min-gain %.2f, %u moves); GPU hit rate %% of distinct-expert accesses\n",
                sequences, host_gib, base.heat.half_life_steps, base.heat.token_weight, base.heat.hysteresis, base.heat.min_gain,
                base.heat.max_moves);
    for (const char* family : {"v4flash", "drift", "bursty", "uniform"}) {
        trace::SyntheticParams p = trace::synthetic_family(family);
        p.sequences = sequences;
        p.seed = 2;
        const auto profile = trace::profile_from_trace(trace::synthesize(p)).counts;
        p.seed = 1;
        const trace::RouteTrace t = trace::synthesize(p);
        const trace::DispatchList list = trace::dispatches_of(t, 0);
        trace::ReplayOptions o = base, hindsight = base;
        o.profile = profile;
        hindsight.profile = trace::profile_from_trace(t).counts;
        std::printf("\nfamily %s: %zu steps, %llu tokens, %zu dispatches, %zu accesses, %u x %u experts of %llu bytes\n", family,
                    t.steps.size(), static_cast<unsigned long long>(t.token_steps()), list.size(), list.keys.size(),
                    t.header.layers, t.header.experts, static_cast<unsigned long long>(t.header.expert_bytes));
        header();
        for (double gib : {8.0, 16.0, 32.0, 64.0}) {
            const std::uint64_t gpu = std::uint64_t(gib * (1ull << 30)), host = std::uint64_t(host_gib * (1ull << 30));
            const placement::Slots slots = placement::slots_for(list.geometry, placement::Capacity{gpu, host});
            const double oracle = 100 * trace::synthetic_oracle(p, slots.gpu).hit_rate();
            row((std::to_string(int(gib)) + " GiB").c_str(), list, gpu, host, o, hindsight, oracle);
        }
    }
    for (int a = 3; a < argc; ++a) {
        const trace::RouteTrace t = trace::read_route_trace(argv[a]);
        const trace::DispatchList list = trace::dispatches_of(t, 0);
        trace::ReplayOptions hindsight = base;
        hindsight.profile = trace::profile_from_trace(t).counts;
        const std::uint64_t keys = list.geometry.keys(), B = list.geometry.expert_bytes;
        std::printf("\ntrace %s: %zu steps, %llu tokens, %zu dispatches, %zu accesses, %u x %u experts of %llu bytes\n", argv[a],
                    t.steps.size(), static_cast<unsigned long long>(t.token_steps()), list.size(), list.keys.size(),
                    t.header.layers, t.header.experts, static_cast<unsigned long long>(B));
        header();
        for (std::uint64_t eighths : {1, 2, 4, 6}) {
            const std::uint64_t slots = keys * eighths / 8;
            row((std::to_string(slots) + " slots").c_str(), list, slots * B, (keys - slots) * B, base, hindsight, -1);
        }
    }
    std::printf("\n* modelled ms per token of the heat policy (HBM, PCIe and SSD bytes over 4478, 55.4 and 7 GB/s, summed)\n");
    return 0;
}
