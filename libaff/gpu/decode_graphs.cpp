// The captured decode steps (decode_graphs.hpp).
#include "libaff/gpu/decode_graphs.hpp"

#include <algorithm>

namespace aff::gpu::fwd {

bool DecodeGraphs::launch(const std::vector<const void*>& key, const Stream& stream,
                          const std::function<bool()>& record) {
    auto it = std::find_if(graphs_.begin(), graphs_.end(), [&](const Cached& g) { return g.key == key; });
    if (it == graphs_.end()) {
        if (graphs_.size() >= kMaxGraphs) graphs_.erase(graphs_.begin());
        Cached c{key, Graph{}, false};
        c.graph.capture(stream, [&] { c.pending = record(); });
        ++captures_;
        graphs_.push_back(std::move(c));
        it = graphs_.end() - 1;
    }
    it->graph.launch(stream);
    return it->pending;
}

}  // namespace aff::gpu::fwd
