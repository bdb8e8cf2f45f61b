// One part of GpuModel::Impl (forward_impl.hpp): the route ring, the one record of a call's
// routing on the GPU. The router kernel writes each main layer's K expert ids and gate
// weights per token into it as it runs (router_topk's copy: no extra launch or graph node,
// so captured decode steps record too), in calls of any length; after the call's logits one
// copy brings the whole call's routing to the host (drain), where the expert tiers' mover
// (forward_tiers.cpp) and a route observer (route traces, forward_routes.cpp) read it. The
// device words live in the activations (Activations::route_ring, sized for their capacity,
// moving with them); this part holds the host side. The ring holds the main layers only: the
// MTP layer (layer num_layers, forward_mtp.cpp) has no rows in it, so neither the mover nor
// a trunk call's report ever sees the draft's routing; its calls, never captured, are read
// from the router's own outputs instead (LayerRoutes, below). Private to the GPU forward.
#pragma once

#include "libaff/checkpoint/config.hpp"
#include "libaff/gpu/device.hpp"
#include "kernels/router_topk.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace aff::gpu::fwd {

// A call of n tokens lays its routing out packed for that n: the ids [layer][n][K] (int32),
// then the weights [layer][n][K] (fp32), every layer of the model (a part of a split model
// writes its own layers' rows only), so that one copy of route_ring_words(c, n) words drains it.
inline std::size_t route_ring_words(const ModelConfig& c, std::size_t tokens) {
    return 2 * std::size_t(c.num_layers) * tokens * std::size_t(c.experts_per_token);
}

// Where layer l's rows of a call of n tokens go (the router's copy).
inline RouterCopy route_ring_slot(std::int32_t* ring, const ModelConfig& c, int layer, int n) {
    const std::size_t k = std::size_t(c.experts_per_token), half = std::size_t(c.num_layers) * n * k;
    std::int32_t* ids = ring + std::size_t(layer) * n * k;
    return {ids, reinterpret_cast<float*>(ring + half + std::size_t(layer) * n * k)};
}

struct RouteRing {
    // Queues the copy of a call of n tokens' routing to the host on `stream` (the caller
    // synchronises it, after the call's logits: one wait for both).
    void drain(const ModelConfig& c, const std::int32_t* ring, int n, const Stream& stream);
    // After the drained copy finished: layer l's ids and weights, [n][K] each.
    std::span<const std::int32_t> ids(int layer) const;
    std::span<const float> weights(int layer) const;
    int tokens() const { return tokens_; }

private:
    // The drained call's words (route_ring_words), pinned so that the copy is queued behind
    // the logits' and shares their wait; grown (rarely: a longer prefill) when a call needs more.
    PinnedBuffer host_;
    int tokens_ = 0, layers_ = 0, top_k_ = 0;
};

// One layer's routing of one call, host side: the MTP layer's in GpuModel::mtp_forward
// (forward_mtp.cpp), for a route observer only. An MTP call is never captured into a graph,
// so no ring rows are needed: the router's own outputs (Activations::route_ids, route_w,
// which nothing after the router rewrites within the layer) hold its ids and gate weights
// when the call's last launch is queued, and one drain copies them after the logits.
struct LayerRoutes {
    // Queues the copy of n tokens' K ids and weights to the host on `stream` (the caller
    // synchronises it with the logits' wait).
    void drain(const std::int32_t* ids, const float* weights, int n, int top_k, const Stream& stream);
    // After the drained copy finished: ids and weights, [n][K] each.
    std::span<const std::int32_t> ids() const;
    std::span<const float> weights() const;
    int tokens() const { return tokens_; }

private:
    PinnedBuffer host_;  // ids [n][K], then weights [n][K]; pinned for the same reason as RouteRing's
    int tokens_ = 0, top_k_ = 0;
};

}  // namespace aff::gpu::fwd
