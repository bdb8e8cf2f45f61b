// The route ring's host side (route_ring.hpp): the one copy after a call, and reading it; the
// same for the MTP layer's one layer (LayerRoutes).
#include "libaff/gpu/route_ring.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>

namespace aff::gpu::fwd {

void RouteRing::drain(const ModelConfig& c, const std::int32_t* ring, int n, const Stream& stream) {
    if (n < 1) throw_internal("route ring: a drain of no tokens");
    const std::size_t bytes = route_ring_words(c, std::size_t(n)) * 4;
    if (host_.size() < bytes) {
        stream.synchronize();  // a previous drain may still be copying into the old buffer
        host_ = PinnedBuffer(std::max(bytes, route_ring_words(c, 64) * 4));
    }
    stream.copy(host_.data(), ring, bytes);
    tokens_ = n;
    layers_ = c.num_layers;
    top_k_ = c.experts_per_token;
}

std::span<const std::int32_t> RouteRing::ids(int layer) const {
    if (layer < 0 || layer >= layers_) throw_internal("route ring: layer " + std::to_string(layer) + " out of range");
    const std::size_t row = std::size_t(tokens_) * top_k_;
    return {static_cast<const std::int32_t*>(host_.data()) + std::size_t(layer) * row, row};
}

std::span<const float> RouteRing::weights(int layer) const {
    if (layer < 0 || layer >= layers_) throw_internal("route ring: layer " + std::to_string(layer) + " out of range");
    const std::size_t row = std::size_t(tokens_) * top_k_, half = std::size_t(layers_) * row;
    return {static_cast<const float*>(host_.data()) + half + std::size_t(layer) * row, row};
}

void LayerRoutes::drain(const std::int32_t* ids, const float* weights, int n, int top_k, const Stream& stream) {
    if (n < 1 || top_k < 1) throw_internal("layer routes: a drain of no tokens");
    const std::size_t row = std::size_t(n) * std::size_t(top_k) * 4;
    if (host_.size() < 2 * row) {
        stream.synchronize();  // a previous drain may still be copying into the old buffer
        host_ = PinnedBuffer(std::max(2 * row, std::size_t(64) * std::size_t(top_k) * 8));
    }
    stream.copy(host_.data(), ids, row);
    stream.copy(static_cast<std::uint8_t*>(host_.data()) + row, weights, row);
    tokens_ = n;
    top_k_ = top_k;
}

std::span<const std::int32_t> LayerRoutes::ids() const {
    return {static_cast<const std::int32_t*>(host_.data()), std::size_t(tokens_) * top_k_};
}

std::span<const float> LayerRoutes::weights() const {
    const std::size_t row = std::size_t(tokens_) * top_k_;
    return {static_cast<const float*>(host_.data()) + row, row};
}

}  // namespace aff::gpu::fwd
