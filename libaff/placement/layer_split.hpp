// Which layers each GPU runs when the forward is split across several (--gpus N, a layer
// split): contiguous ranges in device order, each device's share of the bytes proportional
// to the memory it has, every device at least one layer. Pure arithmetic on byte counts, so
// CPU builds compile it and unit tests pin it (tests/unit/placement/layer_split_test.cpp); the
// GPU forward (libaff/gpu/forward_model.cpp) measures the bytes and builds one shard a range.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace aff {

struct LayerSplitInput {
    std::vector<std::size_t> layer_bytes;  // what each layer needs on its device (weights, state)
    std::size_t first_bytes = 0;           // only on the first device (the embedding)
    std::size_t last_bytes = 0;            // only on the last (final norm, hyper head, head)
    std::size_t each_bytes = 0;            // on every device (activations, shared tables)
    std::vector<std::size_t> available;    // bytes each device may use
    std::vector<std::string> names;        // each device as errors name it ("GPU 1")
    std::vector<int> forced;               // layers on each device, when given (tests); else planned
};

struct LayerRange {
    int first = 0, end = 0;  // layers first .. end-1
    std::size_t bytes = 0;   // what the device needs for them, fixed parts included
};

// One range per device, covering every layer in order. Throws a device error naming the MiB
// missing when the model does not fit (in all, or on one device as split), a usage error
// for fewer layers than devices or a forced split that does not cover the layers.
std::vector<LayerRange> split_layers(const LayerSplitInput& in);

}  // namespace aff
