// One canonical naming for DeepSeek-V4 tensors: the official checkpoint names
// (model doc §2.2-2.4, e.g. "layers.3.attn.wq_a.weight" + "layers.3.attn.wq_a.scale").
// transformers 5.17 writes a mix on save_pretrained (a "model." prefix on everything
// but the head, transformers names for embed/hc_head, official names elsewhere, and
// "attn.norm" for the main kv_norm: its reverse rename of ".norm." catches it), and
// transformers names throughout with save_original_format=False (incl. the fused
// expert tensors). canonical_tensor_name maps any of these to the official name.
#pragma once

#include <string>

namespace aff {

struct CanonicalName {
    enum class Kind { plain, fused_gate_up, fused_down };
    Kind kind = Kind::plain;
    // Official name; for fused expert tensors the prefix "layers.N.ffn.experts."
    std::string name;
};

CanonicalName canonical_tensor_name(const std::string& stored);

}  // namespace aff
