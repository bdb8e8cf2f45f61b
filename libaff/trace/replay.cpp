// Trace replay over the placement engine (replay.hpp).
#include "libaff/trace/replay.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

namespace aff::trace {

using namespace placement;

namespace {

double ratio(std::uint64_t a, std::uint64_t b) { return b == 0 ? 0.0 : double(a) / double(b); }

}  // namespace

double ReplayResult::gpu_hit_rate() const { return ratio(counters.gpu_hits, counters.accesses); }
double ReplayResult::host_hit_rate() const { return ratio(counters.host_hits, counters.accesses); }
double ReplayResult::ssd_rate() const { return ratio(counters.ssd_reads, counters.accesses); }
double ReplayResult::pcie_bytes_per_token() const { return ratio(counters.pcie_bytes, token_steps); }
double ReplayResult::ssd_bytes_per_token() const { return ratio(counters.ssd_bytes, token_steps); }
double ReplayResult::seconds_per_token(const Bandwidths& bw) const {
    if (token_steps == 0) return 0;
    const double s = double(counters.hbm_bytes) / (bw.hbm_gbps * 1e9) + double(counters.pcie_bytes) / (bw.pcie_gbps * 1e9) +
                     double(counters.ssd_bytes) / (bw.ssd_gbps * 1e9);
    return s / double(token_steps);
}

DispatchList dispatches_of(const RouteTrace& t, std::uint64_t expert_bytes) {
    const TraceHeader& h = t.header;
    DispatchList d;
    d.geometry.layers = h.layers;
    d.geometry.experts = h.experts;
    d.geometry.expert_bytes = expert_bytes ? expert_bytes : h.expert_bytes;
    d.geometry.hash_layers = h.hash_layers;
    // Draft steps are left out: the draft layer's experts are not the tier engine's (formats/
    // route-trace.md §5.1), and its tokens are not the main model's.
    d.token_steps = 0;
    for (const TraceStep& st : t.steps)
        if (!st.draft()) d.token_steps += st.n();
    std::vector<std::uint32_t> count(h.experts, 0);
    std::vector<std::uint16_t> seen;
    d.begin.push_back(0);
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
        const TraceStep& st = t.steps[s];
        if (st.draft()) continue;
        for (std::size_t b = 0; b < st.layers.size(); ++b) {
            seen.clear();
            for (std::size_t i = 0; i < st.n(); ++i)
                for (std::uint16_t e : st.selection(b, i, h.top_k))
                    if (count[e]++ == 0) seen.push_back(e);
            std::sort(seen.begin(), seen.end());
            for (std::uint16_t e : seen) {
                d.keys.push_back(d.geometry.key(st.layers[b], e));
                d.tokens.push_back(count[e]);
                count[e] = 0;
            }
            d.step.push_back(s);
            d.layer.push_back(st.layers[b]);
            d.begin.push_back(d.keys.size());
        }
    }
    // Next uses by a backward pass; first uses are what is left at the start.
    d.next_use.assign(d.keys.size(), kNever);
    std::vector<std::uint64_t> upcoming(d.geometry.keys(), kNever);
    for (std::size_t i = d.size(); i-- > 0;)
        for (std::uint64_t a = d.begin[i]; a < d.begin[i + 1]; ++a) {
            d.next_use[a] = upcoming[d.keys[a]];
            upcoming[d.keys[a]] = i;
        }
    d.first_use = std::move(upcoming);
    return d;
}

ReplayResult replay_one(const DispatchList& list, std::uint64_t gpu_bytes, std::uint64_t host_bytes,
                        const std::string& policy_name, const ReplayOptions& o) {
    const Geometry& g = list.geometry;
    const Slots slots = slots_for(g, Capacity{gpu_bytes, host_bytes});
    const std::vector<ExpertKey> order = profile_order(g, o.profile);
    std::unique_ptr<Policy> policy = make_policy(policy_name, o.heat);
    PlacementEngine engine(g, slots, order, *policy, policy->needs_future() ? std::span(list.first_use) : std::span<const std::uint64_t>());
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::uint64_t a = list.begin[i], n = list.begin[i + 1] - a;
        Dispatch d;
        d.index = i;
        d.step = list.step[i];
        d.layer = list.layer[i];
        d.hash = list.layer[i] < g.hash_layers.size() && g.hash_layers[list.layer[i]];
        d.experts = std::span(list.keys).subspan(a, n);
        d.tokens = std::span(list.tokens).subspan(a, n);
        d.next_use = std::span(list.next_use).subspan(a, n);
        engine.dispatch(d);
    }
    ReplayResult r;
    r.policy = policy_name;
    r.gpu_bytes = gpu_bytes;
    r.host_bytes = host_bytes;
    r.slots = slots;
    r.counters = engine.counters();
    r.token_steps = list.token_steps;
    return r;
}

std::vector<ReplayResult> replay(const RouteTrace& trace, const ReplayOptions& o) {
    if (o.policies.empty()) throw_usage("no placement policy to replay");
    if (o.gpu_bytes.empty()) throw_usage("no GPU capacity to replay (--gpu-mib)");
    for (const std::string& p : o.policies) make_policy(p, o.heat);  // unknown names fail before any work
    const DispatchList list = dispatches_of(trace, o.expert_bytes);
    profile_order(list.geometry, o.profile);
    std::vector<ReplayResult> out;
    for (std::uint64_t gpu : o.gpu_bytes)
        for (const std::string& p : o.policies) out.push_back(replay_one(list, gpu, o.host_bytes, p, o));
    return out;
}

void write_replay_text(std::ostream& out, const std::vector<ReplayResult>& rs, const Bandwidths& bw) {
    char line[256];
    std::snprintf(line, sizeof line, "%9s %8s %7s %-7s %7s %7s %7s %8s %10s %10s %9s\n", "gpu_mib", "gpu_slot", "host", "policy",
                  "gpu_hit", "host", "ssd", "hash_pre", "pcie_B/tok", "ssd_B/tok", "ms/token");
    out << line;
    for (const ReplayResult& r : rs) {
        std::snprintf(line, sizeof line, "%9.0f %8u %7u %-7s %6.2f%% %6.2f%% %6.2f%% %8llu %10.4g %10.4g %9.4f\n",
                      double(r.gpu_bytes) / (1 << 20), r.slots.gpu, r.slots.host, r.policy.c_str(), 100 * r.gpu_hit_rate(),
                      100 * r.host_hit_rate(), 100 * r.ssd_rate(), static_cast<unsigned long long>(r.counters.hash_prefetched),
                      r.pcie_bytes_per_token(), r.ssd_bytes_per_token(), 1e3 * r.seconds_per_token(bw));
        out << line;
    }
}

nlohmann::json replay_json(const std::vector<ReplayResult>& rs, const Bandwidths& bw) {
    nlohmann::json j;
    j["bandwidths_gbps"] = {{"hbm", bw.hbm_gbps}, {"pcie", bw.pcie_gbps}, {"ssd", bw.ssd_gbps}};
    j["results"] = nlohmann::json::array();
    for (const ReplayResult& r : rs) {
        const Counters& c = r.counters;
        j["results"].push_back({{"policy", r.policy},
                                {"gpu_bytes", r.gpu_bytes},
                                {"host_bytes", r.host_bytes},
                                {"gpu_slots", r.slots.gpu},
                                {"host_slots", r.slots.host},
                                {"dispatches", c.dispatches},
                                {"accesses", c.accesses},
                                {"gpu_hits", c.gpu_hits},
                                {"host_hits", c.host_hits},
                                {"ssd_reads", c.ssd_reads},
                                {"hash_accesses", c.hash_accesses},
                                {"hash_prefetched", c.hash_prefetched},
                                {"selections", c.selections},
                                {"selection_gpu_hits", c.selection_gpu_hits},
                                {"admissions", c.admissions},
                                {"demotions_to_host", c.demotions_to_host},
                                {"drops", c.drops},
                                {"hbm_bytes", c.hbm_bytes},
                                {"pcie_bytes", c.pcie_bytes},
                                {"ssd_bytes", c.ssd_bytes},
                                {"token_steps", r.token_steps},
                                {"gpu_hit_rate", r.gpu_hit_rate()},
                                {"host_hit_rate", r.host_hit_rate()},
                                {"pcie_bytes_per_token", r.pcie_bytes_per_token()},
                                {"ssd_bytes_per_token", r.ssd_bytes_per_token()},
                                {"seconds_per_token", r.seconds_per_token(bw)}});
    }
    return j;
}

}  // namespace aff::trace
