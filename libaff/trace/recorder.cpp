// The routing recorder of recorder.hpp.
#include "libaff/trace/recorder.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

namespace aff::trace {

TraceHeader trace_header_for(const ModelConfig& c, const std::string& model_path) {
    TraceHeader h;
    h.layers = static_cast<std::uint32_t>(c.num_layers);
    h.experts = static_cast<std::uint32_t>(c.n_routed_experts);
    h.top_k = static_cast<std::uint32_t>(c.experts_per_token);
    h.hash_layers.assign(h.layers, false);
    for (std::uint32_t l = 0; l < h.layers && l < c.hash_routed.size(); ++l) h.hash_layers[l] = c.hash_routed[l];
    if (std::filesystem::is_directory(model_path)) {
        std::ifstream in(std::filesystem::path(model_path) / "config.json", std::ios::binary);
        const std::string bytes{std::istreambuf_iterator<char>(in), {}};
        h.identity_kind = IdentityKind::checkpoint;
        h.identity = xxh3_64(bytes.data(), bytes.size());
    } else {
        const Container container = Container::open(model_path);
        const auto b = container.file_bytes();
        h.identity_kind = IdentityKind::container;
        for (int i = 0; i < 8; ++i) h.identity |= std::uint64_t(b[56 + i]) << (8 * i);
        for (const ExpertExtent& e : container.experts())
            if (!e.key.draft) {
                h.expert_bytes = e.size;
                break;
            }
    }
    h.check();
    return h;
}

RouteRecorder::RouteRecorder(std::string path, TraceHeader header, Compression compression)
    : writer_(std::move(path), std::move(header), compression) {}

void RouteRecorder::begin(std::uint32_t sequence, Phase phase) {
    begin(std::span<const std::uint32_t>(&sequence, 1), phase);
}

void RouteRecorder::begin(std::span<const std::uint32_t> sequences, Phase phase) {
    if (sequences.empty()) throw_internal("route recorder: a call of no sequences");
    step_ = TraceStep{};  // a call that threw left its layers behind
    sequences_.assign(sequences.begin(), sequences.end());
    next_ = 0;
    phase_ = phase;
}

void RouteRecorder::on_route(const RouteEvent& e) {
    const TraceHeader& h = writer_.header();
    if (e.top_k != int(h.top_k) || e.experts.size() != e.tokens.size() * h.top_k)
        throw_internal("route recorder: the router's selections do not match the trace's top-k");
    // Layers from L on are the draft's (Model::mtp_forward's layer L, Model::dspark_block's stages
    // L + s): a call of them is a draft step whatever the caller said (formats/route-trace.md §5.1).
    // Layers past kMaxDraftLayers of them (none route) are not traced.
    if (e.layer >= int(h.layers + kMaxDraftLayers)) return;
    const bool draft = e.layer >= int(h.layers);
    if (step_.layers.empty()) {
        step_.tokens.clear();
        for (std::size_t i = 0; i < e.tokens.size(); ++i)
            step_.tokens.push_back({static_cast<std::uint32_t>(e.tokens[i]), sequences_[next_],
                                    static_cast<std::uint32_t>(e.start + std::int64_t(i)), draft ? Phase::draft : phase_});
    } else if (draft != step_.draft()) {
        throw_internal("route recorder: the draft layer and main layers in one forward call");
    }
    step_.layers.push_back(static_cast<std::uint16_t>(e.layer));
    for (int x : e.experts) step_.experts.push_back(static_cast<std::uint16_t>(x));
    step_.weights.insert(step_.weights.end(), e.weights.begin(), e.weights.end());
}

void RouteRecorder::on_forward_end() {
    if (!step_.layers.empty()) writer_.add(step_);
    step_ = TraceStep{};
    if (next_ + 1 < sequences_.size()) ++next_;
}

}  // namespace aff::trace
