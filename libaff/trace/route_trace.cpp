// The validating reader of formats/route-trace.md: header (§3), chunks (§4), step records
// (§5) and the end record (§6), each rule checked in the spec's order with one message
// naming the field. Digests are skipped only in fuzzing builds, as libFuzzer expects.
#include "libaff/trace/route_trace.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/mapped_file.hpp"
#include "libaff/trace/route_trace_layout.hpp"

#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace aff::trace {

using namespace layout;

namespace {

bool digest_ok(std::uint64_t stored, std::uint64_t computed) {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    (void)stored, (void)computed;
    return true;
#else
    return stored == computed;
#endif
}

std::string num(std::uint64_t v) { return std::to_string(v); }

TraceHeader parse_header(std::span<const std::uint8_t> b, std::size_t& offset) {
    if (b.size() < 64) throw_format("truncated header: " + num(b.size()) + " bytes, the fixed part is 64");
    if (std::memcmp(b.data(), kMagic, 8) != 0) throw_format("not a route trace (bad magic)");
    const auto version = get(&b[8], 4);
    if (version != kVersion) throw_unsupported("route trace version " + num(version) + " (this build reads 1)");
    TraceHeader h;
    h.layers = static_cast<std::uint32_t>(get(&b[12], 4));
    h.experts = static_cast<std::uint32_t>(get(&b[16], 4));
    h.top_k = static_cast<std::uint32_t>(get(&b[20], 4));
    h.check();
    const std::size_t size = header_size(h.layers);
    if (b.size() < size) throw_format("truncated header: " + num(b.size()) + " bytes, " + num(h.layers) + " layers need " + num(size));
    const auto kind = get(&b[24], 4);
    if (kind > 3) throw_format("header: identity_kind " + num(kind) + " is not defined");
    h.identity_kind = static_cast<IdentityKind>(kind);
    if (get(&b[28], 4) != 0) throw_format("header: reserved field at offset 28 is not zero");
    h.identity = get(&b[32], 8);
    h.expert_bytes = get(&b[40], 8);
    if (get(&b[48], 8) != 0) throw_format("header: reserved field at offset 48 is not zero");
    h.hash_layers.resize(h.layers);
    for (std::uint32_t l = 0; l < h.layers; ++l) {
        const std::uint8_t f = b[56 + l];
        if (f & 0xFE) throw_format("header: layer " + num(l) + " flags have reserved bits set");
        h.hash_layers[l] = f & 1;
    }
    for (std::size_t i = 56 + h.layers; i < size - 8; ++i)
        if (b[i] != 0) throw_format("header: padding byte at offset " + num(i) + " is not zero");
    if (!digest_ok(get(&b[size - 8], 8), xxh3_64(b.data(), size - 8))) throw_format("header: digest mismatch");
    offset = size;
    return h;
}

// Decodes the step records of one chunk's payload, appending to `steps`.
void parse_steps(const TraceHeader& h, std::span<const std::uint8_t> p, std::uint64_t count, std::uint64_t first,
                 std::vector<TraceStep>& steps) {
    const std::uint32_t K = h.top_k;
    std::size_t at = 0;
    for (std::uint64_t s = 0; s < count; ++s) {
        const std::uint64_t index = first + s;
        with_context("step " + num(index), [&] {
            if (p.size() - at < kStepHeader) throw_format("truncated");
            const auto n = get(&p[at], 4);
            const auto m = get(&p[at + 4], 2);
            if (n == 0 || n > kMaxStepTokens) throw_format("tokens " + num(n) + " out of range (1.." + num(kMaxStepTokens) + ")");
            // A draft step may hold more layers than a tiny model's L (checked below, with its phase).
            if (m == 0 || m > std::max<std::uint64_t>(h.layers, kMaxDraftLayers))
                throw_format("layer_count " + num(m) + " out of range (1.." + num(h.layers) + ")");
            if (get(&p[at + 6], 2) != 0) throw_format("reserved field is not zero");
            const std::size_t size = kStepHeader + kTokenEntry * n + m * layer_block_size(n, K);
            if (p.size() - at < size) throw_format("truncated: needs " + num(size) + " bytes, " + num(p.size() - at) + " left in the chunk");
            TraceStep st;
            st.tokens.resize(n);
            const std::uint8_t* q = &p[at + kStepHeader];
            for (std::uint64_t i = 0; i < n; ++i, q += kTokenEntry) {
                TraceToken& t = st.tokens[i];
                t.token = static_cast<std::uint32_t>(get(q, 4));
                t.sequence = static_cast<std::uint32_t>(get(q + 4, 4));
                t.position = static_cast<std::uint32_t>(get(q + 8, 4));
                if (q[12] >= kPhases) throw_format("token " + num(i) + ": phase " + num(q[12]) + " is not defined");
                t.phase = static_cast<Phase>(q[12]);
                if (q[13] | q[14] | q[15]) throw_format("token " + num(i) + ": reserved bytes are not zero");
                if ((t.phase == Phase::draft) != (st.tokens[0].phase == Phase::draft))
                    throw_format("token " + num(i) + ": draft and other tokens in one step");
            }
            // A draft step records the draft layers, numbered L, L + 1, ... in order; other steps main layers.
            const bool draft = st.draft();
            if (draft && m > kMaxDraftLayers)
                throw_format("layer_count " + num(m) + " in a draft step (1.." + num(kMaxDraftLayers) + ")");
            if (!draft && m > h.layers) throw_format("layer_count " + num(m) + " out of range (1.." + num(h.layers) + ")");
            st.layers.resize(m);
            st.experts.resize(m * n * K);
            st.weights.resize(m * n * K);
            for (std::uint64_t b = 0; b < m; ++b) {
                const auto layer = get(q, 2);
                if (draft && layer != h.layers + b)
                    throw_format("layer " + num(layer) + " in a draft step (its block " + num(b) + " is layer " + num(h.layers + b) + ")");
                if (!draft && layer >= h.layers) throw_format("layer " + num(layer) + " out of range (" + num(h.layers) + " layers)");
                if (b > 0 && layer <= st.layers[b - 1])
                    throw_format("layer " + num(layer) + " does not follow layer " + num(st.layers[b - 1]));
                if (get(q + 2, 2) != 0) throw_format("layer " + num(layer) + ": reserved field is not zero");
                st.layers[b] = static_cast<std::uint16_t>(layer);
                const std::uint8_t* ids = q + 4;
                const std::uint8_t* ws = ids + 2 * n * K;
                for (std::uint64_t j = 0; j < n * K; ++j) {
                    const auto e = get(ids + 2 * j, 2);
                    if (e >= h.experts)
                        throw_format("layer " + num(layer) + " token " + num(j / K) + ": expert id " + num(e) +
                                     " out of range (" + num(h.experts) + " experts)");
                    const float w = get_f32(ws + 4 * j);
                    if (!std::isfinite(w)) throw_format("layer " + num(layer) + " token " + num(j / K) + ": weight is not finite");
                    st.experts[b * n * K + j] = static_cast<std::uint16_t>(e);
                    st.weights[b * n * K + j] = w;
                }
                q += layer_block_size(n, K);
            }
            at += size;
            steps.push_back(std::move(st));
        });
    }
    if (at != p.size()) throw_format(num(p.size() - at) + " bytes left over after " + num(count) + " steps");
}

std::vector<std::uint8_t> decode_zstd(std::span<const std::uint8_t> stored, std::uint64_t raw_size) {
    const unsigned long long content = ZSTD_getFrameContentSize(stored.data(), stored.size());
    if (content == ZSTD_CONTENTSIZE_ERROR) throw_format("payload is not a zstd frame");
    if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != raw_size)
        throw_format("zstd frame holds " + num(content) + " bytes, raw_size says " + num(raw_size));
    std::vector<std::uint8_t> out(raw_size);
    const std::size_t got = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
    if (ZSTD_isError(got)) throw_format(std::string("zstd: ") + ZSTD_getErrorName(got));
    if (got != raw_size) throw_format("zstd frame decodes to " + num(got) + " bytes, raw_size says " + num(raw_size));
    return out;
}

}  // namespace

const char* to_string(Phase phase) {
    switch (phase) {
        case Phase::prefill: return "prefill";
        case Phase::decode: return "decode";
        case Phase::draft_verify: return "draft-verify";
        case Phase::replay: return "replay";
        case Phase::draft: return "draft";
    }
    return "?";
}

const char* to_string(IdentityKind kind) {
    switch (kind) {
        case IdentityKind::none: return "none";
        case IdentityKind::container: return "container";
        case IdentityKind::checkpoint: return "checkpoint";
        case IdentityKind::synthetic: return "synthetic";
    }
    return "?";
}

void TraceHeader::check() const {
    if (layers == 0 || layers > kMaxLayers) throw_format("header: layers " + num(layers) + " out of range (1..4096)");
    if (experts == 0 || experts > kMaxExperts) throw_format("header: experts " + num(experts) + " out of range (1..65536)");
    if (top_k == 0 || top_k > kMaxTopK || top_k > experts)
        throw_format("header: top_k " + num(top_k) + " out of range (1..min(experts, 64))");
    if (!hash_layers.empty() && hash_layers.size() != layers) throw_internal("trace header: hash_layers does not have one entry a layer");
}

std::uint64_t RouteTrace::token_steps() const {
    std::uint64_t n = 0;
    for (const TraceStep& s : steps) n += s.n();
    return n;
}

RouteTrace parse_route_trace(std::span<const std::uint8_t> b, const std::string& name) {
    try {
        RouteTrace t;
        std::size_t at = 0;
        t.header = parse_header(b, at);
        std::uint64_t chunks = 0;
        for (;;) {
            if (b.size() - at < 4) throw_format("truncated: no end record");
            if (std::memcmp(&b[at], kEndTag, 4) == 0) break;
            with_context("chunk " + num(chunks), [&] {
                if (std::memcmp(&b[at], kChunkTag, 4) != 0) throw_format("bad tag");
                if (b.size() - at < kChunkHeader) throw_format("truncated chunk header");
                const std::uint8_t* c = &b[at];
                const auto codec = get(c + 4, 4), steps = get(c + 8, 4), first = get(c + 16, 8);
                const auto stored = get(c + 24, 8), raw = get(c + 32, 8);
                if (codec > 1) throw_format("codec " + num(codec) + " is not defined");
                if (steps == 0 || steps > kMaxChunkSteps) throw_format("steps " + num(steps) + " out of range");
                if (get(c + 12, 4) != 0) throw_format("reserved field is not zero");
                if (first != t.steps.size())
                    throw_format("first_step " + num(first) + ", but " + num(t.steps.size()) + " steps came before");
                if (stored == 0 || stored > kMaxStored) throw_format("stored_size " + num(stored) + " out of range");
                if (raw == 0 || raw > kMaxRaw) throw_format("raw_size " + num(raw) + " out of range");
                if (codec == codec_none && raw != stored) throw_format("raw_size differs from stored_size for codec 0");
                if (b.size() - at - kChunkHeader < stored)
                    throw_format("truncated: stored_size " + num(stored) + ", " + num(b.size() - at - kChunkHeader) + " bytes left");
                const std::span<const std::uint8_t> payload = b.subspan(at + kChunkHeader, stored);
                Xxh3Stream digest;
                digest.update(c, 40);
                digest.update(payload.data(), payload.size());
                if (!digest_ok(get(c + 40, 8), digest.digest())) throw_format("digest mismatch");
                if (codec == codec_zstd) {
                    const std::vector<std::uint8_t> raw_bytes = decode_zstd(payload, raw);
                    parse_steps(t.header, raw_bytes, steps, first, t.steps);
                } else {
                    parse_steps(t.header, payload, steps, first, t.steps);
                }
                at += kChunkHeader + stored;
            });
            ++chunks;
        }
        with_context("end record", [&] {
            if (b.size() - at < kEndRecord) throw_format("truncated");
            const std::uint8_t* e = &b[at];
            if (!digest_ok(get(e + 40, 8), xxh3_64(e, 40))) throw_format("digest mismatch");
            if (get(e + 4, 4) != 0 || get(e + 32, 8) != 0) throw_format("reserved field is not zero");
            if (get(e + 8, 8) != chunks) throw_format("chunks " + num(get(e + 8, 8)) + ", the file has " + num(chunks));
            if (get(e + 16, 8) != t.steps.size())
                throw_format("steps " + num(get(e + 16, 8)) + ", the chunks hold " + num(t.steps.size()));
            if (get(e + 24, 8) != t.token_steps())
                throw_format("token_steps " + num(get(e + 24, 8)) + ", the steps hold " + num(t.token_steps()));
            if (b.size() - at != kEndRecord) throw_format(num(b.size() - at - kEndRecord) + " trailing bytes after the end record");
        });
        return t;
    } catch (Error& e) {
        if (!name.empty()) e.set_path_if_empty(name);
        throw;
    }
}

RouteTrace read_route_trace(const std::string& path) {
    return parse_mapped_file(path, [&](std::span<const std::uint8_t> bytes) { return parse_route_trace(bytes, ""); });
}

}  // namespace aff::trace
