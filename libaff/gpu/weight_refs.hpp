// The GPU forward's weight plan (GpuModel::Impl, forward_impl.hpp): where each weight of a
// layer is in the weight arena and in which form, and where each layer's decode state lies in
// a sequence's state buffer. Offsets only (resolved to pointers once the arena exists), so a
// plan is made and checked before anything is allocated. Private to the GPU forward.
#pragma once

#include "kernels/dense_gemv.hpp"

#include <cstddef>
#include <cstdint>

namespace aff::gpu::fwd {

// A weight in the arena: offset and form, resolved to a pointer once the arena exists.
struct DenseRef {
    std::size_t offset = 0;
    DenseType type = DenseType::f32;
    int rows = 0, cols = 0;
};

// A linear map y = W x: the checkpoint's FP8 bytes + E8M0 scales, or a dense BF16/F32 matrix.
struct Linear {
    bool fp8 = false;
    std::size_t w_offset = 0, scale_offset = 0;
    DenseType type = DenseType::f32;
    int rows = 0, cols = 0;
};

struct CompressorRefs {
    Linear wkv, wgate;
    std::size_t ape = 0, norm = 0;
    int ratio = 0, dim = 0;
    bool overlap = false;
};

struct AttentionRefs {
    bool on_gpu = false;
    std::size_t sink = 0, q_norm = 0, kv_norm = 0;
    Linear wq_a, wq_b, wkv, wo_a, wo_b;
    bool has_compressor = false, has_indexer = false;
    CompressorRefs compressor, indexer;
    Linear index_wq_b, index_weights;
};

// Where one layer's decode state lives inside a sequence's state buffer (GpuDecodeState).
struct CompressorStateRefs {
    std::size_t pending_kv = 0, pending_gate = 0, prev_kv = 0, prev_gate = 0, entries = 0;
    int capacity = 0;  // entries
};
struct LayerStateRefs {
    std::size_t ring = 0;
    CompressorStateRefs compressor, indexer;
};

// One sequence's tokens in a call: rows row .. row+n-1 of the activations, its state, and its
// start position: known on the host (prefill), or read by the kernels from start_at (device
// memory) when they run (decode, so a captured graph serves every position).
struct Seq {
    std::uint8_t* state = nullptr;
    std::int64_t start = 0;
    int n = 0, row = 0;
    const std::int32_t* start_at = nullptr;
};

struct LayerRefs {
    AttentionRefs attn;
    std::size_t attn_norm = 0, ffn_norm = 0;
    std::size_t hc_attn_fn = 0, hc_attn_base = 0, hc_attn_scale = 0;
    std::size_t hc_ffn_fn = 0, hc_ffn_base = 0, hc_ffn_scale = 0;
    Linear gate;                          // router [E, D]
    std::size_t bias = 0, tid2eid = 0;    // one of the two
    bool hash = false, has_shared = false;
    Linear shared_w1, shared_w2, shared_w3;
    DenseRef experts_w1, experts_w2, experts_w3;  // stacks [E][rows][cols]
    std::size_t expert_row = 0;  // codebook-stored: the layer's row of the expert table (E addresses)
    bool rotated_w13 = false, rotated_w2 = false;  // some expert of the stacks is TQ2875R
    std::size_t rotated_flags = 0;                 // when so: uint8 [3][E], 1 = TQ2875R (ExpertMatrix order)
};

}  // namespace aff::gpu::fwd
