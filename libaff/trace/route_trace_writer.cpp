// The route-trace writer of route_trace_writer.hpp (formats/route-trace.md §3-§6).
#include "libaff/trace/route_trace_writer.hpp"

#include "libaff/core/atomic_file.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/trace/route_trace_layout.hpp"

#include <zstd.h>

#include <cmath>

namespace aff::trace {

using namespace layout;

std::vector<std::uint8_t> encode_header(const TraceHeader& h) {
    h.check();
    std::vector<std::uint8_t> out(header_size(h.layers), 0);
    std::memcpy(out.data(), kMagic, 8);
    put(&out[8], kVersion, 4);
    put(&out[12], h.layers, 4);
    put(&out[16], h.experts, 4);
    put(&out[20], h.top_k, 4);
    put(&out[24], static_cast<std::uint32_t>(h.identity_kind), 4);
    put(&out[32], h.identity, 8);
    put(&out[40], h.expert_bytes, 8);
    for (std::uint32_t l = 0; l < h.layers && l < h.hash_layers.size(); ++l) out[56 + l] = h.hash_layers[l] ? 1 : 0;
    put(&out[out.size() - 8], xxh3_64(out.data(), out.size() - 8), 8);
    return out;
}

void encode_step(const TraceHeader& h, const TraceStep& s, std::vector<std::uint8_t>& out) {
    const std::size_t n = s.n(), m = s.layers.size(), K = h.top_k;
    if (n == 0 || n > kMaxStepTokens) throw_internal("route trace: a step of " + std::to_string(n) + " tokens");
    if (m == 0 || m > (s.draft() ? kMaxDraftLayers : h.layers))
        throw_internal("route trace: a step with " + std::to_string(m) + " layers");
    if (s.experts.size() != m * n * K || s.weights.size() != m * n * K)
        throw_internal("route trace: a step's selections do not match its tokens and layers");
    const std::size_t at = out.size();
    out.resize(at + kStepHeader + kTokenEntry * n + m * layer_block_size(n, K), 0);
    std::uint8_t* q = &out[at];
    put(q, n, 4);
    put(q + 4, m, 2);
    q += kStepHeader;
    for (const TraceToken& t : s.tokens) {
        put(q, t.token, 4);
        put(q + 4, t.sequence, 4);
        put(q + 8, t.position, 4);
        q[12] = static_cast<std::uint8_t>(t.phase);
        q += kTokenEntry;
    }
    for (const TraceToken& t : s.tokens)
        if ((t.phase == Phase::draft) != s.draft()) throw_internal("route trace: draft and other tokens in one step");
    for (std::size_t b = 0; b < m; ++b) {
        // A draft step's blocks are the draft layers L, L + 1, ... in order (§5.1).
        if ((s.draft() ? s.layers[b] != h.layers + b : s.layers[b] >= h.layers) || (b > 0 && s.layers[b] <= s.layers[b - 1]))
            throw_internal("route trace: layers of a step out of range or order");
        put(q, s.layers[b], 2);
        std::uint8_t* ids = q + 4;
        std::uint8_t* ws = ids + 2 * n * K;
        for (std::size_t j = 0; j < n * K; ++j) {
            const std::uint16_t e = s.experts[b * n * K + j];
            const float w = s.weights[b * n * K + j];
            if (e >= h.experts) throw_internal("route trace: expert id " + std::to_string(e) + " out of range");
            if (!std::isfinite(w)) throw_internal("route trace: a weight that is not finite");
            put(ids + 2 * j, e, 2);
            put_f32(ws + 4 * j, w);
        }
        q += layer_block_size(n, K);
    }
}

RouteTraceWriter::RouteTraceWriter(std::string path, TraceHeader header, Compression compression)
    : path_(std::move(path)), header_(std::move(header)), compression_(compression) {
    if (header_.hash_layers.empty()) header_.hash_layers.assign(header_.layers, false);
    encode_header(header_);  // checks the geometry now, not at the first publish
}

void RouteTraceWriter::add(const TraceStep& step) {
    std::vector<std::uint8_t> record;
    encode_step(header_, step, record);
    if (record.size() > kMaxRaw) throw_internal("route trace: one step's record passes the 64 MiB chunk limit");
    if (chunk_steps_ > 0 && chunk_.size() + record.size() > kChunkTarget) flush_chunk();
    chunk_.insert(chunk_.end(), record.begin(), record.end());
    ++chunk_steps_;
    ++steps_;
    token_steps_ += step.n();
}

void RouteTraceWriter::flush_chunk() {
    if (chunk_steps_ == 0) return;
    std::vector<std::uint8_t> stored;
    std::uint32_t codec = codec_none;
    if (compression_ == Compression::zstd) {
        stored.resize(ZSTD_compressBound(chunk_.size()));
        const std::size_t got = ZSTD_compress(stored.data(), stored.size(), chunk_.data(), chunk_.size(), 3);
        if (ZSTD_isError(got)) throw_internal(std::string("zstd: ") + ZSTD_getErrorName(got));
        stored.resize(got);
        codec = codec_zstd;
    }
    const std::vector<std::uint8_t>& body = codec == codec_zstd ? stored : chunk_;
    std::uint8_t h[kChunkHeader] = {};
    std::memcpy(h, kChunkTag, 4);
    put(h + 4, codec, 4);
    put(h + 8, chunk_steps_, 4);
    put(h + 16, steps_ - chunk_steps_, 8);
    put(h + 24, body.size(), 8);
    put(h + 32, chunk_.size(), 8);
    Xxh3Stream digest;
    digest.update(h, 40);
    digest.update(body.data(), body.size());
    put(h + 40, digest.digest(), 8);
    chunks_bytes_.insert(chunks_bytes_.end(), h, h + sizeof h);
    chunks_bytes_.insert(chunks_bytes_.end(), body.begin(), body.end());
    ++chunks_;
    chunk_.clear();
    chunk_steps_ = 0;
}

void RouteTraceWriter::publish() {
    flush_chunk();
    std::uint8_t e[kEndRecord] = {};
    std::memcpy(e, kEndTag, 4);
    put(e + 8, chunks_, 8);
    put(e + 16, steps_, 8);
    put(e + 24, token_steps_, 8);
    put(e + 40, xxh3_64(e, 40), 8);
    AtomicFile file(path_);
    file.write(encode_header(header_));
    file.write(chunks_bytes_);
    file.write(e, sizeof e);
    file.commit();
}

void write_route_trace(const std::string& path, const RouteTrace& trace, Compression compression) {
    RouteTraceWriter w(path, trace.header, compression);
    for (const TraceStep& s : trace.steps) w.add(s);
    w.publish();
}

}  // namespace aff::trace
