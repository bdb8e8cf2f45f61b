// The block code of formats/quant-codebook.md §4: 256 weights as a 128-step bitshift
// trellis over 2-dimensional codebook entries, 720 index bits + one bf16 scale = 92
// bytes (2.875 bits a weight). encode_block finds the index bits with a Viterbi search
// minimising the importance-weighted squared error; decode_block is the reference
// decoder every other decoder (GPU kernels included) must match bit for bit.
#pragma once

#include "libaff/quant/codebook.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace aff::quant {

constexpr int kBlockWeights = 256;
constexpr int kBlockSteps = kBlockWeights / Codebook::kDim;  // 128
constexpr int kIndexBytes = 90;                              // 720 bits
constexpr int kBlockBytes = kIndexBytes + 2;                 // + bf16 scale
// Bits consumed by the steps of each period of 8 (45 bits per 16 weights).
constexpr std::array<int, 8> kStepBits{6, 5, 6, 6, 5, 6, 5, 6};
constexpr int kPeriodBits = 45;

// Bit offset just past step t's fresh bits in the block's index stream.
constexpr int step_end_bit(int t) {
    int within = 0;
    for (int i = 0; i <= t % 8; ++i) within += kStepBits[i];
    return kPeriodBits * (t / 8) + within;
}

struct EncodeOptions {
    // Search passes: 1 uses the block's (weighted) RMS as scale; each further pass refits
    // the scale by least squares to the chosen entries and searches again.
    int passes = 1;
};

// Per-thread working memory of the Viterbi search (about 150 KiB), reused across blocks.
class TrellisScratch {
public:
    TrellisScratch();
    std::vector<float> best;  // per step, the cheapest predecessor cost of each state
    std::vector<float> last;  // costs of every window at the final step
    // The codebook reordered for the traceback (trellis.cpp), for the codebook whose
    // digest is tables_digest; rebuilt when a block comes with another codebook.
    std::vector<float> tables;
    std::uint64_t tables_digest = 0;
};

// Encodes x[0..256) into out[0..92). importance (nullptr: all 1) weighs each position's
// squared error; a position with importance 0 is free (used for padding past the end
// of a row). Non-finite input throws aff::Error (format).
void encode_block(const float* x, const float* importance, const Codebook& codebook, TrellisScratch& scratch,
                  std::uint8_t* out, const EncodeOptions& options = {});

// The steps of encode_block, for encoders that run the Viterbi search elsewhere (the GPU
// encoder, libaff/gpu/trellis_search.hpp) on many blocks at once. encode_block is exactly
//   begin → while (searching) { targets → search (search_block or BlockSearch) → searched } → finish,
// so an encoder that follows the same steps and whose search returns search_block's windows
// writes the same bytes. q: the block's 256 position weights (importance, or 1s).
struct BlockEncoding {
    float scale = 0.0f;       // of the pass to search next
    float best_scale = 0.0f;  // of the cheapest pass so far
    double best_error = 0.0;  // its weighted error (0 when there is only one pass: not needed)
    int pass = 0;
    bool zero = false;       // nothing to represent: the block is all zeros, scale 0
    bool searching = false;  // a search pass is due (targets, then searched)
    std::array<std::uint16_t, kBlockSteps> windows{};  // of the cheapest pass
};
// Checks the weights and position weights (aff::Error on non-finite or negative ones) and
// picks the first pass's scale.
void encode_begin(const float* x, const float* q, BlockEncoding& state);
// y[0..256): the targets of the due pass, x divided by its scale.
void encode_targets(const float* x, const BlockEncoding& state, float* y);
// Takes the due pass's search result: its error, and the scale of a further pass if any.
void encode_searched(const float* x, const float* q, const Codebook& codebook, const std::uint16_t* windows,
                     BlockEncoding& state, const EncodeOptions& options);
// Writes the 92 bytes; throws aff::Error when no pass had a usable scale.
void encode_finish(const BlockEncoding& state, std::uint8_t* out);
// The Viterbi search of one block: the cheapest window sequence for targets y under
// position weights q (ties to the smallest window, formats/quant-codebook.md §8).
void search_block(const float* y, const float* q, const Codebook& codebook, TrellisScratch& scratch,
                  std::uint16_t* windows);

// Runs the search of many blocks at once. Block i has targets y[256·i …] and position
// weights q[256·q_index[i] …]; its 128 windows go to windows[128·i …]. An implementation
// must return exactly search_block's windows (the GPU one: libaff/gpu/trellis_search.hpp).
// Called from one thread at a time.
class BlockSearch {
public:
    virtual ~BlockSearch() = default;
    // One line for the user: where the search runs.
    virtual std::string describe() const = 0;
    virtual void search(const Codebook& codebook, const float* y, std::size_t blocks, const float* q,
                        std::size_t q_blocks, const std::uint32_t* q_index, std::uint16_t* windows) = 0;
    // The same search begun in the background, so the caller's threads can work meanwhile
    // (aff-quantize's pipeline): the arguments must stay valid and unchanged, and windows
    // unread, until wait() returns. One started search at a time; search() may be called
    // while one is under way. By default start() searches at once and wait() returns.
    virtual void start(const Codebook& codebook, const float* y, std::size_t blocks, const float* q,
                       std::size_t q_blocks, const std::uint32_t* q_index, std::uint16_t* windows) {
        search(codebook, y, blocks, q, q_blocks, q_index, windows);
    }
    // Waits for the started search, if any; rethrows its error.
    virtual void wait() {}
};

// Decodes 256 weights from a 92-byte block.
void decode_block(const std::uint8_t* block, const Codebook& codebook, float* out);

// The 128 windows a block's index bits spell (what decode_block looks entries up by).
void block_windows(const std::uint8_t* block, std::uint16_t* windows);
float block_scale(const std::uint8_t* block);

// Σ decoded[i]·x[i] over the block without materialising the weights. x[i] must be +0 for
// i ≥ weights (a row's padding): those steps are skipped, which cannot change the result.
float dot_block(const std::uint8_t* block, const Codebook& codebook, const float* x, int weights = kBlockWeights);
// dot_block of four blocks (four rows of a matrix) against the same x, out[i] bit for bit
// dot_block(blocks[i], ...): four independent sums, so one's latency hides behind the others.
void dot_block4(const std::uint8_t* const blocks[4], const Codebook& codebook, const float* x, int weights,
                float out[4]);

}  // namespace aff::quant
