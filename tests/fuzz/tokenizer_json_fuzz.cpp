// libFuzzer target: tokenizer.json loading and encoding of untrusted bytes. Property: any
// input either loads or throws aff::Error (never crashes or throws anything else), and a
// loaded tokenizer encodes the input itself, repaired or not, and decodes the ids back to
// valid UTF-8.
#include "libaff/core/error.hpp"
#include "libaff/tokenizer/tokenizer.hpp"
#include "libaff/tokenizer/utf8.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        auto tok = aff::tokenizer::Tokenizer::from_json(text, "fuzz.json");
        std::string out;
        try {
            out = tok.decode(tok.encode(text));
        } catch (const aff::Error&) {
            return 0;  // an id without a token (e.g. a gap in a fuzzed vocabulary)
        }
        if (!aff::tokenizer::utf8_valid(out)) std::abort();
    } catch (const aff::Error&) {
    }
    return 0;
}
