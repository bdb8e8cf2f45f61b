// Sign structure of a TQ2875 codebook: a table whose 4096 entries are sign flips (and, for
// shift 3, a swap) of a few base pairs can be decoded on a GPU from a small base table that
// fits 32 times in shared memory, one copy per bank, so a warp's 32 random look-ups never
// conflict. The format's bytes do not change: a structured codebook is an ordinary 4096-entry
// table that happens to have this form, found here by checking every entry exactly.
//
// Definition (entry w, base b = w >> shift, stored as entry w & ~(2^shift - 1)):
//   shift 2: c0 negated if bit 0 of w is set, c1 negated if bit 1 is set (fp16 sign bit).
//   shift 3: bit 2 swaps c0 and c1 first, then bits 0 and 1 negate as for shift 2.
#pragma once

#include "libaff/quant/codebook.hpp"

#include <cstdint>
#include <vector>

namespace aff::quant {

struct SignStructure {
    int shift = 0;  // 3, 2, or 0 (no structure)
    // 4096 >> shift packed base pairs: c0's fp16 bits in the low half, c1's in the high half.
    // Empty when shift is 0.
    std::vector<std::uint32_t> base;
};

// The entry that index w decodes to under `shift` (0, 2 or 3) from its base pair, packed as
// above. The single definition every other function (and the GPU decoder's tests) relies on.
std::uint32_t sign_structured_entry(int shift, std::uint32_t base_pair, std::uint32_t w);

// The largest shift (3, then 2) whose definition holds bit for bit for all 4096 entries of
// cb; shift 0 and an empty base otherwise.
SignStructure find_sign_structure(const Codebook& cb);

// The 4096-entry codebook a base table describes. Throws aff::Error (usage) for a shift
// other than 0, 2, 3 or a base whose size is not 4096 >> shift, and (format) if a value is
// not finite.
Codebook expand_sign_structure(int shift, const std::vector<std::uint32_t>& base);

}  // namespace aff::quant
