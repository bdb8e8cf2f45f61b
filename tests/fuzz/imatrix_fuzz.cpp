// libFuzzer target: the imatrix parsers (GGUF and legacy .dat) on untrusted bytes.
// Property: any input parses or throws aff::Error, never crashes or throws anything
// else; a parsed file's entries are self-consistent, their importance can be taken,
// and a GGUF one yields a profile or an aff::Error.
#include "libaff/core/error.hpp"
#include "libaff/quant/expert_profile.hpp"
#include "libaff/quant/imatrix.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const aff::quant::Imatrix im = aff::quant::parse_imatrix(std::span(data, size), "fuzz.imatrix");
        for (const auto& e : im.entries) {
            if (!im.legacy && (e.sum2.size() != e.cols * e.matrices || e.counts.size() != e.matrices)) std::abort();
            for (std::size_t m = 0; m < e.matrices && m < 4; ++m)
                if (im.importance(e, m, im.legacy ? e.cols : e.cols, im.legacy ? 1 : e.matrices).size() != e.cols)
                    std::abort();
        }
        if (!im.legacy) {
            try {
                aff::quant::profile_from_imatrix(im, 0, nullptr);
            } catch (const aff::Error&) {
            }
        }
    } catch (const aff::Error&) {
    }
    return 0;
}
