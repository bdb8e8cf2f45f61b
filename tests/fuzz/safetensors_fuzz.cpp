// libFuzzer target: the safetensors header parser on untrusted bytes. Property: any
// input either parses or throws aff::Error (never crashes, reads out of bounds or throws
// anything else), and every tensor it accepts lies inside the input with a byte size
// that matches its dtype and shape.
#include "libaff/checkpoint/safetensors.hpp"
#include "libaff/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto tensors = aff::parse_safetensors(std::span(data, size), "fuzz.safetensors");
        for (const aff::SafetensorsTensor& t : tensors) {
            if (t.offset > size || t.nbytes > size - t.offset) std::abort();
            if (t.elements() * aff::dtype_size(t.dtype) != t.nbytes) std::abort();
        }
    } catch (const aff::Error&) {
    }
    return 0;
}
