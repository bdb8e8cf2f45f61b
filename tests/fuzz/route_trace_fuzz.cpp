// libFuzzer target: the route-trace reader (formats/route-trace.md) on untrusted bytes.
// Property: any input parses or throws aff::Error, never crashes or throws anything else;
// a parsed trace is consistent with its header (every layer, expert id, phase and shape in range)
// and writing it again gives a trace that reads back to the same steps.
#include "libaff/core/error.hpp"
#include "libaff/trace/route_trace.hpp"
#include "libaff/trace/route_trace_writer.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const aff::trace::RouteTrace t = aff::trace::parse_route_trace(std::span(data, size), "fuzz.aft");
        const auto& h = t.header;
        if (h.hash_layers.size() != h.layers) std::abort();
        std::vector<std::uint8_t> again = aff::trace::encode_header(h);
        for (const auto& s : t.steps) {
            if (s.experts.size() != s.layers.size() * s.n() * h.top_k) std::abort();
            for (const auto& t : s.tokens)
                if (static_cast<int>(t.phase) >= aff::trace::kPhases) std::abort();
            for (auto l : s.layers)
                if (s.draft() ? l != h.layers : l >= h.layers) std::abort();
            for (auto e : s.experts)
                if (e >= h.experts) std::abort();
            std::vector<std::uint8_t> record;
            aff::trace::encode_step(h, s, record);  // must accept what the reader accepted
        }
    } catch (const aff::Error&) {
    }
    return 0;
}
