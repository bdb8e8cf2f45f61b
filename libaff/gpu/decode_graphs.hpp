// One part of GpuModel::Impl (forward_impl.hpp): the captured decode steps, one per set of
// sequences (their state buffers are baked into the launches; everything else that changes
// between steps, the expert table included, is read by the kernels when they run). Kept up to
// kMaxGraphs, the oldest dropped first; cleared when what they point at moves (the
// activations, the layer count). Private to the GPU forward.
#pragma once

#include "libaff/gpu/device.hpp"

#include <cstddef>
#include <functional>
#include <vector>

namespace aff::gpu::fwd {

inline constexpr std::size_t kMaxGraphs = 16;

class DecodeGraphs {
public:
    // Launches the graph of `key` on `stream`, capturing it first from `record` (which returns
    // whether the step leaves an expand pending) when there is none; returns what record
    // returned at capture.
    bool launch(const std::vector<const void*>& key, const Stream& stream, const std::function<bool()>& record);
    void clear() { graphs_.clear(); }
    std::size_t captures() const { return captures_; }  // since construction

private:
    struct Cached {
        std::vector<const void*> key;
        Graph graph;
        bool pending = false;
    };
    std::vector<Cached> graphs_;
    std::size_t captures_ = 0;
};

}  // namespace aff::gpu::fwd
