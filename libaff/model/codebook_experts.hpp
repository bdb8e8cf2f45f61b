// What an ExpertSource whose routed experts are stored in the codebook format (TQ2875,
// formats/quant-codebook.md) offers the GPU model besides matvec: the stored bytes and the
// codebook, so libaff/gpu/forward_weights.cpp uploads the experts as they are (2.875 bits a weight)
// and multiplies with moe_gemv instead of decoding them. A source implements both this and
// aff::ExpertSource (a quantised container's does once it offers it); the GPU model finds it
// with dynamic_cast. Header only, so CPU-only builds compile sources that implement it.
#pragma once

#include "libaff/model/weights.hpp"
#include "libaff/quant/codebook.hpp"

#include <cstdint>

namespace aff {

class CodebookExperts {
public:
    virtual ~CodebookExperts() = default;

    struct Stored {
        const std::uint8_t* bytes = nullptr;  // rows × ceil(cols/256) blocks of 92 bytes; null: not codebook-stored
        bool rotated = false;                 // TQ2875R: stored as W Hᵀ (the input must be rotated first)
    };
    // The matrix's stored bytes; they must stay valid as long as the source lives.
    virtual Stored codebook_matrix(int layer, int expert, ExpertMatrix which) const = 0;
    virtual const quant::Codebook& codebook() const = 0;
};

}  // namespace aff
