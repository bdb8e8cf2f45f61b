// Expert profile bytes (formats/expert-profile.md), construction from an imatrix and
// the summaries aff-profile prints.
#include "libaff/quant/expert_profile.hpp"

#include "libaff/core/atomic_file.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/mapped_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>

namespace aff::quant {

namespace {

constexpr std::uint8_t kMagic[8] = {0x89, 'A', 'F', 'P', 0x0D, 0x0A, 0x1A, 0x0A};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeader = 32;
constexpr std::uint32_t kMaxLayers = 4096, kMaxExperts = 65536;

// Fuzz builds skip the digest, which random mutations would almost never get past.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr bool kCheckDigest = false;
#else
constexpr bool kCheckDigest = true;
#endif

// Summaries add counts up (per layer, over the whole profile) in 64 bits: a profile whose
// counts sum past 2^63 would print wrapped totals and shares above 100 %. Refused.
void check_count_total(const std::vector<std::uint64_t>& counts) {
    std::uint64_t total = 0;
    for (const std::uint64_t c : counts)
        if (__builtin_add_overflow(total, c, &total) || total > std::uint64_t(INT64_MAX))
            throw_format("the activation counts sum past 2^63 (not counts of routed tokens)");
}

void put(std::uint8_t* p, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint64_t get(const std::uint8_t* p, int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    return v;
}

}  // namespace

std::vector<std::uint8_t> ExpertProfile::serialize() const {
    std::vector<std::uint8_t> out(kHeader + counts.size() * 8 + 8, 0);
    std::memcpy(out.data(), kMagic, 8);
    put(&out[8], kVersion, 4);
    put(&out[12], layers, 4);
    put(&out[16], experts, 4);
    put(&out[20], static_cast<std::uint32_t>(source), 4);
    for (std::size_t i = 0; i < counts.size(); ++i) put(&out[kHeader + 8 * i], counts[i], 8);
    put(&out[out.size() - 8], xxh3_64(out.data(), out.size() - 8), 8);
    return out;
}

ExpertProfile ExpertProfile::parse(std::span<const std::uint8_t> b, const std::string& what) {
    auto body = [&] {
        if (b.size() < kHeader + 8) throw_format("truncated: " + std::to_string(b.size()) + " bytes");
        if (std::memcmp(b.data(), kMagic, 8) != 0) throw_format("not an expert profile (bad magic)");
        if (get(&b[8], 4) != kVersion)
            throw_unsupported("profile version " + std::to_string(get(&b[8], 4)) + " (this build reads 1)");
        ExpertProfile p;
        p.layers = static_cast<std::uint32_t>(get(&b[12], 4));
        p.experts = static_cast<std::uint32_t>(get(&b[16], 4));
        const auto src = get(&b[20], 4);
        if (p.layers == 0 || p.layers > kMaxLayers) throw_format("layers " + std::to_string(p.layers) + " out of range");
        if (p.experts == 0 || p.experts > kMaxExperts)
            throw_format("experts " + std::to_string(p.experts) + " out of range");
        if (src > 2) throw_format("source " + std::to_string(src) + " is not defined");
        if (get(&b[24], 8) != 0) throw_format("reserved field is not zero");
        p.source = static_cast<ProfileSource>(src);
        const std::uint64_t n = static_cast<std::uint64_t>(p.layers) * p.experts;
        if (b.size() != kHeader + 8 * n + 8)
            throw_format("is " + std::to_string(b.size()) + " bytes, " + std::to_string(p.layers) + " x " +
                         std::to_string(p.experts) + " counts need " + std::to_string(kHeader + 8 * n + 8));
        if (kCheckDigest && get(&b[b.size() - 8], 8) != xxh3_64(b.data(), b.size() - 8)) throw_format("digest mismatch");
        p.counts.resize(n);
        for (std::uint64_t i = 0; i < n; ++i) p.counts[i] = get(&b[kHeader + 8 * i], 8);
        check_count_total(p.counts);
        return p;
    };
    return what.empty() ? body() : with_context(what, body);
}

ExpertProfile ExpertProfile::read_file(const std::string& path) {
    return parse_mapped_file(path, [](std::span<const std::uint8_t> bytes) { return parse(bytes, ""); });
}

void ExpertProfile::write_file(const std::string& path) const { write_file_atomically(path, serialize()); }

ExpertProfile profile_from_imatrix(const Imatrix& im, std::uint32_t max_layers, ProfileFromImatrixReport* report) {
    if (im.legacy)
        throw Error(ErrorKind::format,
                    "a legacy .dat imatrix has no per-expert counts; make a GGUF imatrix (llama-imatrix "
                    "--output-format gguf)",
                    im.path);
    // Per layer, the counts of its gate/up tensor (or down when that is all there is).
    std::map<int, const ImatrixEntry*> chosen;
    std::uint64_t experts = 0;
    for (const auto& e : im.entries) {
        const auto match = match_llama_tensor(e.name, static_cast<int>(max_layers));
        if (!match) {
            if (report) report->unmatched.push_back(e.name);
            continue;
        }
        if (!match->experts) {
            if (report) ++report->other_tensors;
            continue;
        }
        const auto& ref = match->experts;
        if (max_layers && ref->layer >= static_cast<int>(max_layers)) {
            if (report && (report->ignored_layers.empty() || report->ignored_layers.back() != ref->layer))
                report->ignored_layers.push_back(ref->layer);
            continue;
        }
        if (experts == 0) experts = e.matrices;
        if (e.matrices != experts)
            throw Error(ErrorKind::format,
                        "tensor " + e.name + " has " + std::to_string(e.matrices) + " experts, others " +
                            std::to_string(experts),
                        im.path);
        auto [it, fresh] = chosen.emplace(ref->layer, &e);
        if (!fresh && it->second->name.find("_down_") != std::string::npos && !ref->w2) it->second = &e;
    }
    if (chosen.empty()) throw Error(ErrorKind::format, "no routed-expert tensors (blk.N.ffn_*_exps.weight)", im.path);
    const std::uint64_t layers = max_layers ? max_layers : static_cast<std::uint64_t>(chosen.rbegin()->first) + 1;
    if (layers > kMaxLayers || experts > kMaxExperts || layers * experts > (1u << 24))
        throw Error(ErrorKind::format,
                    std::to_string(layers) + " layers x " + std::to_string(experts) + " experts is out of range",
                    im.path);
    ExpertProfile p;
    p.source = ProfileSource::imatrix;
    p.experts = static_cast<std::uint32_t>(experts);
    p.layers = static_cast<std::uint32_t>(layers);
    p.counts.assign(static_cast<std::size_t>(p.layers) * p.experts, 0);
    for (const auto& [layer, e] : chosen)
        for (std::uint32_t x = 0; x < p.experts; ++x)
            p.counts[static_cast<std::size_t>(layer) * p.experts + x] = static_cast<std::uint64_t>(std::llround(e->counts[x]));
    with_context(im.path, [&] { check_count_total(p.counts); });
    return p;
}

std::vector<LayerSummary> summarize(const ExpertProfile& p) {
    std::vector<LayerSummary> out;
    for (std::uint32_t l = 0; l < p.layers; ++l) {
        std::vector<std::uint64_t> c(p.counts.begin() + static_cast<std::ptrdiff_t>(l) * p.experts,
                                     p.counts.begin() + static_cast<std::ptrdiff_t>(l + 1) * p.experts);
        std::sort(c.rbegin(), c.rend());
        LayerSummary s;
        s.layer = l;
        s.activations = std::accumulate(c.begin(), c.end(), std::uint64_t{0});
        s.used = static_cast<std::uint32_t>(std::count_if(c.begin(), c.end(), [](auto v) { return v > 0; }));
        if (s.activations > 0) {
            s.top_share = static_cast<double>(c[0]) / static_cast<double>(s.activations);
            std::uint64_t acc = 0;
            for (std::uint32_t i = 0; i < c.size(); ++i) {
                acc += c[i];
                if (!s.for_half && 2 * acc >= s.activations) s.for_half = i + 1;
                if (!s.for_80 && 5 * acc >= 4 * s.activations) s.for_80 = i + 1;
            }
        }
        out.push_back(s);
    }
    return out;
}

std::vector<RankedExpert> top_experts(const ExpertProfile& p, std::uint32_t n) {
    std::vector<RankedExpert> out;
    for (std::uint32_t l = 0; l < p.layers; ++l) {
        std::vector<std::uint32_t> ids(p.experts);
        std::iota(ids.begin(), ids.end(), 0u);
        std::stable_sort(ids.begin(), ids.end(), [&](auto a, auto b) { return p.count(l, a) > p.count(l, b); });
        std::uint64_t total = 0;
        for (std::uint32_t x = 0; x < p.experts; ++x) total += p.count(l, x);
        for (std::uint32_t i = 0; i < std::min(n, p.experts); ++i)
            out.push_back({l, ids[i], p.count(l, ids[i]),
                           total ? static_cast<double>(p.count(l, ids[i])) / static_cast<double>(total) : 0.0});
    }
    return out;
}

std::string_view to_string(ProfileSource source) {
    switch (source) {
    case ProfileSource::imatrix: return "imatrix";
    case ProfileSource::route_trace: return "route-trace";
    default: return "unknown";
    }
}

void write_profile_text(std::ostream& out, const ExpertProfile& p, std::uint32_t top) {
    const auto layers = summarize(p);
    std::uint64_t total = 0;
    for (const auto& s : layers) total += s.activations;
    out << "profile: " << p.layers << " layers x " << p.experts << " experts, source " << to_string(p.source) << ", "
        << total << " activations\n";
    out << "layer  activations  used  top-share  experts-for-50%  experts-for-80%\n";
    char line[160];
    for (const auto& s : layers) {
        std::snprintf(line, sizeof line, "%5u  %11llu  %4u  %8.1f%%  %15u  %15u\n", s.layer,
                      static_cast<unsigned long long>(s.activations), s.used, 100.0 * s.top_share, s.for_half,
                      s.for_80);
        out << line;
    }
    if (top == 0) return;
    out << "top " << top << " experts per layer (layer expert activations share-of-layer):\n";
    for (const auto& r : top_experts(p, top)) {
        if (r.count == 0) continue;
        std::snprintf(line, sizeof line, "%5u  %6u  %11llu  %5.1f%%\n", r.layer, r.expert,
                      static_cast<unsigned long long>(r.count), 100.0 * r.share);
        out << line;
    }
}

nlohmann::json profile_json(const ExpertProfile& p, std::uint32_t top) {
    nlohmann::json j;
    j["layers"] = p.layers;
    j["experts"] = p.experts;
    j["source"] = std::string(to_string(p.source));
    std::uint64_t total = 0;
    nlohmann::json per_layer = nlohmann::json::array();
    for (const auto& s : summarize(p)) {
        total += s.activations;
        per_layer.push_back({{"layer", s.layer},
                             {"activations", s.activations},
                             {"used", s.used},
                             {"top_share", s.top_share},
                             {"experts_for_50", s.for_half},
                             {"experts_for_80", s.for_80}});
    }
    j["activations"] = total;
    j["per_layer"] = per_layer;
    nlohmann::json t = nlohmann::json::array();
    for (const auto& r : top_experts(p, top))
        if (r.count > 0) t.push_back({{"layer", r.layer}, {"expert", r.expert}, {"activations", r.count}, {"share", r.share}});
    j["top"] = t;
    return j;
}

}  // namespace aff::quant
