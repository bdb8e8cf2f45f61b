// Writes a route trace (formats/route-trace.md) step by step: steps gather into a chunk
// until it would pass 1 MiB, each chunk is stored raw or as one zstd frame and kept in
// memory (compressed), and publish() writes header, chunks and end record through an
// AtomicFile (temporary name, fsync, rename). It may be called again as steps arrive (a
// server publishes after every request): each call replaces the file with a complete
// trace of every step so far, so no half-written trace is ever visible under the name.
#pragma once

#include "libaff/trace/route_trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace aff::trace {

enum class Compression { none, zstd };

class RouteTraceWriter {
public:
    // Throws aff::Error (format) for a header outside the spec's ranges.
    // Creates nothing until publish().
    RouteTraceWriter(std::string path, TraceHeader header, Compression compression = Compression::zstd);
    // Checks the step against the header (layers, expert ids, weights, shapes): a writer
    // never writes what the reader would reject. Throws aff::Error (internal) naming it.
    void add(const TraceStep& step);
    // Writes the whole trace so far (an open chunk is closed first).
    void publish();

    const TraceHeader& header() const { return header_; }
    std::uint64_t steps() const { return steps_; }

private:
    void flush_chunk();

    std::string path_;
    TraceHeader header_;
    std::vector<std::uint8_t> chunks_bytes_;
    Compression compression_;
    std::vector<std::uint8_t> chunk_;
    std::uint32_t chunk_steps_ = 0;
    std::uint64_t steps_ = 0, chunks_ = 0, token_steps_ = 0;
};

// The bytes of one step record (§5), checked as the reader would check them.
void encode_step(const TraceHeader& header, const TraceStep& step, std::vector<std::uint8_t>& out);
// The header's bytes (§3), digest included.
std::vector<std::uint8_t> encode_header(const TraceHeader& header);

// A whole trace at once (tests, the synthetic generator).
void write_route_trace(const std::string& path, const RouteTrace& trace, Compression compression = Compression::zstd);

}  // namespace aff::trace
