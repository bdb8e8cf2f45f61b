// The summaries of summary.hpp.
#include "libaff/trace/summary.hpp"

#include "libaff/core/hash.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace aff::trace {

namespace {

struct Accumulator {
    std::vector<std::vector<std::uint64_t>> counts;  // [layer][expert]
    std::vector<std::uint64_t> pairs, shared;        // [layer]
    std::uint64_t tokens = 0;
    void init(const TraceHeader& h) {
        counts.assign(h.layers, std::vector<std::uint64_t>(h.experts, 0));
        pairs.assign(h.layers, 0);
        shared.assign(h.layers, 0);
    }
};

std::uint32_t cover(std::vector<std::uint64_t> sorted_desc, std::uint64_t total, std::uint64_t num, std::uint64_t den) {
    std::uint64_t cum = 0;
    for (std::size_t i = 0; i < sorted_desc.size(); ++i) {
        if (cum * den >= total * num) return std::uint32_t(i);
        cum += sorted_desc[i];
    }
    return std::uint32_t(sorted_desc.size());
}

std::vector<LayerPopularity> finish(const TraceHeader& h, const Accumulator& a) {
    std::vector<LayerPopularity> out;
    for (std::uint32_t l = 0; l < h.layers; ++l) {
        LayerPopularity p;
        p.layer = l;
        p.hash = h.hash_layers[l];
        const auto& c = a.counts[l];
        for (std::uint32_t e = 0; e < h.experts; ++e) {
            p.selections += c[e];
            p.used += c[e] > 0;
            if (c[e] > p.busiest_count) p.busiest_count = c[e], p.busiest = e;
        }
        p.pairs = a.pairs[l];
        p.shared = a.shared[l];
        if (p.selections > 0) {
            for (std::uint64_t x : c)
                if (x) {
                    const double q = double(x) / double(p.selections);
                    p.entropy_bits -= q * std::log2(q);
                }
            std::vector<std::uint64_t> s = c;
            std::sort(s.begin(), s.end(), std::greater<>());
            const std::size_t tenth = (h.experts + 9) / 10;
            std::uint64_t top = 0;
            for (std::size_t i = 0; i < tenth; ++i) top += s[i];
            p.top_tenth_share = double(top) / double(p.selections);
            p.cover90 = cover(s, p.selections, 90, 100);
            p.cover99 = cover(s, p.selections, 99, 100);
        }
        out.push_back(p);
    }
    return out;
}

void write_layers(std::ostream& out, const std::vector<LayerPopularity>& layers, std::uint32_t k) {
    char line[200];
    std::snprintf(line, sizeof line, "%6s %4s %11s %5s %8s %9s %7s %7s %8s %12s\n", "layer", "kind", "selections", "used",
                  "entropy", "top10%", "cov90", "cov99", "overlap", "busiest");
    out << line;
    for (const LayerPopularity& p : layers) {
        std::snprintf(line, sizeof line, "%6u %4s %11llu %5u %8.3f %8.2f%% %7u %7u %7.2f%% %6u:%llu\n", p.layer,
                      p.hash ? "hash" : "topk", static_cast<unsigned long long>(p.selections), p.used, p.entropy_bits,
                      100 * p.top_tenth_share, p.cover90, p.cover99, 100 * p.overlap(k), p.busiest,
                      static_cast<unsigned long long>(p.busiest_count));
        out << line;
    }
}

nlohmann::json layers_json(const std::vector<LayerPopularity>& layers, std::uint32_t k) {
    nlohmann::json a = nlohmann::json::array();
    for (const LayerPopularity& p : layers)
        a.push_back({{"layer", p.layer},
                     {"hash", p.hash},
                     {"selections", p.selections},
                     {"used", p.used},
                     {"busiest", p.busiest},
                     {"busiest_count", p.busiest_count},
                     {"entropy_bits", p.entropy_bits},
                     {"top_tenth_share", p.top_tenth_share},
                     {"cover90", p.cover90},
                     {"cover99", p.cover99},
                     {"pairs", p.pairs},
                     {"shared", p.shared},
                     {"overlap", p.overlap(k)}});
    return a;
}

}  // namespace

TraceSummary summarize(const RouteTrace& t) {
    const TraceHeader& h = t.header;
    TraceSummary s;
    s.header = h;
    s.steps = t.steps.size();
    s.token_steps = t.token_steps();
    Accumulator all;
    all.init(h);
    Accumulator phase[kPhases];
    for (auto& p : phase) p.init(h);
    // The last recorded selection of each sequence in each layer, for the overlap.
    std::map<std::uint32_t, std::vector<std::vector<std::uint16_t>>> last;
    std::vector<std::uint16_t> now;
    for (const TraceStep& st : t.steps) {
        if (st.draft()) s.draft_layers = std::max(s.draft_layers, static_cast<std::uint32_t>(st.layers.size()));
        for (std::size_t i = 0; i < st.n(); ++i) {
            const TraceToken& tok = st.tokens[i];
            Accumulator& ph = phase[static_cast<int>(tok.phase)];
            ++all.tokens;
            ++ph.tokens;
            auto& prev = last[tok.sequence];
            if (prev.empty()) prev.resize(h.layers);
            if (st.draft()) continue;  // the draft layer's: counted as tokens, not among the main layers
            for (std::size_t b = 0; b < st.layers.size(); ++b) {
                const std::uint16_t l = st.layers[b];
                const auto sel = st.selection(b, i, h.top_k);
                now.assign(sel.begin(), sel.end());
                std::sort(now.begin(), now.end());
                now.erase(std::unique(now.begin(), now.end()), now.end());
                for (std::uint16_t e : sel) {
                    ++all.counts[l][e];
                    ++ph.counts[l][e];
                }
                if (!prev[l].empty()) {
                    std::uint64_t common = 0;
                    for (std::uint16_t e : now) common += std::binary_search(prev[l].begin(), prev[l].end(), e);
                    ++all.pairs[l], ++ph.pairs[l];
                    all.shared[l] += common, ph.shared[l] += common;
                }
                prev[l] = now;
            }
        }
    }
    s.sequences = last.size();
    s.layers = finish(h, all);
    for (int p = 0; p < kPhases; ++p)
        if (phase[p].tokens > 0)
            s.phases.push_back({static_cast<Phase>(p), phase[p].tokens,
                                static_cast<Phase>(p) == Phase::draft ? std::vector<LayerPopularity>{} : finish(h, phase[p])});
    return s;
}

void write_summary_text(std::ostream& out, const TraceSummary& s) {
    const TraceHeader& h = s.header;
    char line[256];
    std::snprintf(line, sizeof line, "trace: %u layers, %u experts, top-%u, %llu-byte experts, identity %s %016llx\n", h.layers,
                  h.experts, h.top_k, static_cast<unsigned long long>(h.expert_bytes), to_string(h.identity_kind),
                  static_cast<unsigned long long>(h.identity));
    out << line;
    std::snprintf(line, sizeof line, "steps %llu, tokens %llu, sequences %llu\n", static_cast<unsigned long long>(s.steps),
                  static_cast<unsigned long long>(s.token_steps), static_cast<unsigned long long>(s.sequences));
    out << line;
    for (const PhasePopularity& p : s.phases) {
        double entropy = 0, top = 0, c90 = 0, c99 = 0;
        std::uint64_t pairs = 0, shared = 0;
        std::size_t n = 0;
        for (const LayerPopularity& l : p.layers) {
            if (l.selections == 0) continue;
            entropy += l.entropy_bits, top += l.top_tenth_share, c90 += l.cover90, c99 += l.cover99;
            pairs += l.pairs, shared += l.shared;
            ++n;
        }
        if (n == 0) {
            // The draft phase: its routing is the draft's layers' (L, or DSpark's stages L ..), not main layers'.
            if (s.draft_layers > 1)
                std::snprintf(line, sizeof line, "phase %s: %llu tokens (layers %u-%u, the DSpark stages: not in the table below)\n",
                              to_string(p.phase), static_cast<unsigned long long>(p.tokens), h.layers, h.layers + s.draft_layers - 1);
            else
                std::snprintf(line, sizeof line, "phase %s: %llu tokens (layer %u, the MTP layer: not in the table below)\n",
                              to_string(p.phase), static_cast<unsigned long long>(p.tokens), h.layers);
            out << line;
            continue;
        }
        std::snprintf(line, sizeof line,
                      "phase %s: %llu tokens; layer means: entropy %.3f bits, top10%% %.2f%%, cov90 %.1f, cov99 %.1f, overlap %.2f%%\n",
                      to_string(p.phase), static_cast<unsigned long long>(p.tokens), entropy / n, 100 * top / n, c90 / n,
                      c99 / n, pairs ? 100.0 * shared / (double(pairs) * h.top_k) : 0.0);
        out << line;
    }
    write_layers(out, s.layers, h.top_k);
}

nlohmann::json summary_json(const TraceSummary& s) {
    const TraceHeader& h = s.header;
    nlohmann::json hash = nlohmann::json::array();
    for (std::uint32_t l = 0; l < h.layers; ++l)
        if (h.hash_layers[l]) hash.push_back(l);
    nlohmann::json j = {{"layers", h.layers},
                        {"experts", h.experts},
                        {"top_k", h.top_k},
                        {"hash_layers", hash},
                        {"expert_bytes", h.expert_bytes},
                        {"identity_kind", to_string(h.identity_kind)},
                        {"identity", aff::to_hex(h.identity)},
                        {"steps", s.steps},
                        {"token_steps", s.token_steps},
                        {"sequences", s.sequences},
                        {"per_layer", layers_json(s.layers, h.top_k)}};
    j["phases"] = nlohmann::json::object();
    for (const PhasePopularity& p : s.phases)
        j["phases"][to_string(p.phase)] = {{"tokens", p.tokens}, {"per_layer", layers_json(p.layers, h.top_k)}};
    return j;
}

}  // namespace aff::trace
