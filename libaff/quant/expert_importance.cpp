// Matching imatrix tensors to routed-expert matrices (expert_importance.hpp).
#include "libaff/quant/expert_importance.hpp"

#include "libaff/core/error.hpp"

namespace aff::quant {

namespace {
std::uint64_t columns(int which, const ExpertGeometry& g) { return which == 1 ? g.intermediate : g.hidden; }
const char* kMatrixName[3] = {"w1", "w2", "w3"};
}  // namespace

ExpertImportance match_imatrix(const Imatrix& im, const ExpertGeometry& g) {
    ExpertImportance out;
    out.by_layer.assign(g.layers, {nullptr, nullptr, nullptr});
    for (const ImatrixEntry& e : im.entries) {
        // llama.cpp numbers the MTP block after the trunk, so the checkpoint's layer count
        // tells a draft expert tensor (blk.43 for V4-Flash) from a trunk one.
        const auto match = match_llama_tensor(e.name, static_cast<int>(g.source_layers));
        if (!match) {
            out.unused.push_back(e.name);
            continue;
        }
        if (!match->experts || match->mtp) {
            ++out.other_tensors;  // a V4 matrix the main container's experts do not need
            continue;
        }
        const auto& ref = match->experts;
        if (ref->layer < 0 || static_cast<std::uint32_t>(ref->layer) >= g.source_layers) {
            out.unused.push_back(e.name);
            continue;
        }
        if (static_cast<std::uint32_t>(ref->layer) >= g.layers) {
            if (out.skipped_layers.empty() || out.skipped_layers.back() != ref->layer)
                out.skipped_layers.push_back(ref->layer);
            continue;
        }
        const bool uses[3] = {ref->w1, ref->w2, ref->w3};
        for (int which = 0; which < 3; ++which) {
            if (!uses[which]) continue;
            // Checks columns and expert count (names the file and tensor on a mismatch).
            (void)im.importance(e, 0, columns(which, g), g.experts);
            const ImatrixEntry*& slot = out.by_layer[static_cast<std::size_t>(ref->layer)][static_cast<std::size_t>(which)];
            if (slot)
                throw Error(ErrorKind::format,
                            "tensor " + e.name + ": layer " + std::to_string(ref->layer) + " " + kMatrixName[which] +
                                " is already described by tensor " + slot->name,
                            im.path);
            slot = &e;
        }
    }
    for (std::uint32_t l = 0; l < g.layers; ++l) {
        auto& s = out.by_layer[l];
        if (!s[0]) s[0] = s[2];  // gate and up share the layer's input
        if (!s[2]) s[2] = s[0];
        if (!s[0] && !s[1]) out.missing_layers.push_back(l);
    }
    return out;
}

std::vector<float> ExpertImportance::importance(const Imatrix& im, std::uint32_t layer, std::uint32_t expert,
                                                int which, const ExpertGeometry& g) const {
    const ImatrixEntry* e = by_layer.at(layer)[static_cast<std::size_t>(which)];
    if (!e) return {};
    if (!im.legacy && !(e->counts.at(expert) > 0)) return {};  // never routed to: nothing to weigh by
    std::vector<float> v = im.importance(*e, expert, columns(which, g), g.experts);
    for (float x : v)
        if (x > 0) return v;
    return {};  // all zero (a .dat expert never routed to): weighing by it would zero the matrix
}

}  // namespace aff::quant
