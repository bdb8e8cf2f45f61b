// Route traces on the GPU (GpuModel::set_route_observer): the router kernel writes every main
// layer's routing into the route ring during the call (route_ring.hpp), finish_call drains it
// once after the logits, and report_routes hands it to the observer as the CPU forward does:
// one on_route per layer in layer order, then on_forward_end (per sequence of a batched decode).
// The MTP layer's calls (mtp_forward) are reported by Impl::report_mtp_routes as Model::mtp_forward
// reports them: one on_route of layer num_layers (a route trace's draft layer, formats/
// route-trace.md §5.1) at the MTP position with the call's next tokens, then on_forward_end.
// DSpark's stages (dspark_block) by report_dspark_routes as Model::dspark_block reports them:
// one on_route per stage, layers num_layers + s, over the block's ids at the rings' position,
// then on_forward_end.
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"

#include <functional>

namespace aff::gpu {

using namespace fwd;

RouterCopy GpuModel::Impl::ring_slot(const LayerRefs& r, int n) {
    // r may be a layer outside the main ones (the MTP layer, past them in `layers`, or not in
    // it at all), which has no rows in the ring and records nothing there: the mover reads the
    // ring, and the draft's experts are not the tier engine's (trace replay and the profile
    // from a trace leave draft steps out alike). mtp_forward drains the MTP layer's routing
    // from the router's outputs itself (LayerRoutes).
    const std::less<const LayerRefs*> before;
    if (layers.empty() || before(&r, layers.data()) || !before(&r, layers.data() + layers.size())) return {};
    const std::ptrdiff_t layer = &r - layers.data();
    if (layer >= c.num_layers) return {};
    return route_ring_slot(route_ring, c, static_cast<int>(layer), n);
}

void GpuModel::set_route_observer(RouteObserver* observer) {
    if (observer && shards_.front()->options.forward.no_routed_experts)
        throw_unsupported("route traces on the GPU with the routed experts skipped (no_routed_experts): no router runs");
    routes_ = observer;
}

void GpuModel::report_routes(std::span<const std::int32_t> toks, std::span<const std::int64_t> starts) {
    const std::size_t k = std::size_t(shards_.front()->c.experts_per_token);
    const bool per_sequence = starts.size() > 1;  // a decode of several sequences: a forward each
    const std::size_t calls = per_sequence ? toks.size() : 1, width = per_sequence ? 1 : toks.size();
    for (std::size_t i = 0; i < calls; ++i) {
        for (const auto& p : shards_)
            for (int l = p->first_layer; l < p->run_end(); ++l)
                routes_->on_route(RouteEvent{l, starts[i], toks.subspan(i * width, width), int(k),
                                             p->routes.ids(l).subspan(i * width * k, width * k),
                                             p->routes.weights(l).subspan(i * width * k, width * k)});
        routes_->on_forward_end();
    }
}

void GpuModel::Impl::report_mtp_routes(RouteObserver& observer, std::span<const std::int32_t> next,
                                       std::int64_t start) const {
    if (mtp_routes.tokens() != int(next.size())) throw_internal("mtp routes: the MTP layer's routing was not drained");
    observer.on_route(RouteEvent{c.num_layers, start, next, c.experts_per_token, mtp_routes.ids(), mtp_routes.weights()});
    observer.on_forward_end();
}

void GpuModel::Impl::report_dspark_routes(RouteObserver& observer, std::span<const std::int32_t> ids,
                                          std::int64_t start) const {
    if (dspark_routes.size() != std::size_t(dspark.stages)) throw_internal("dspark routes: the stages' routing was not drained");
    for (int s = 0; s < dspark.stages; ++s) {
        const fwd::LayerRoutes& r = dspark_routes[std::size_t(s)];
        if (r.tokens() != int(ids.size())) throw_internal("dspark routes: a stage's routing was not drained");
        observer.on_route(RouteEvent{c.num_layers + s, start, ids, c.experts_per_token, r.ids(), r.weights()});
    }
    observer.on_forward_end();
}

}  // namespace aff::gpu
