// Tests for libaff/placement/layer_split: the ranges a layer split gives for equal and unequal
// devices, the fixed parts (embedding first, head last), the one-layer-each rule, forced
// splits, and the error lines (with the MiB missing) when a model does not fit.
#include "libaff/core/error.hpp"
#include "libaff/placement/layer_split.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using aff::LayerRange;
using aff::LayerSplitInput;

namespace {

constexpr std::size_t M = std::size_t(1) << 20;

LayerSplitInput input(int layers, std::size_t layer_mib, std::vector<std::size_t> available_mib) {
    LayerSplitInput in;
    in.layer_bytes.assign(layers, layer_mib * M);
    for (std::size_t a : available_mib) in.available.push_back(a * M);
    for (std::size_t d = 0; d < available_mib.size(); ++d) in.names.push_back("GPU " + std::to_string(d));
    return in;
}

std::vector<std::pair<int, int>> ranges(const std::vector<LayerRange>& r) {
    std::vector<std::pair<int, int>> out;
    for (const LayerRange& x : r) out.emplace_back(x.first, x.end);
    return out;
}

std::string error_of(const LayerSplitInput& in, aff::ErrorKind& kind) {
    try {
        aff::split_layers(in);
    } catch (const aff::Error& e) {
        kind = e.kind();
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("equal devices take equal halves; one device takes every layer", "[placement]") {
    CHECK(ranges(aff::split_layers(input(4, 100, {1000, 1000}))) == std::vector<std::pair<int, int>>{{0, 2}, {2, 4}});
    const std::vector<LayerRange> one = aff::split_layers(input(5, 100, {1000}));
    CHECK(ranges(one) == std::vector<std::pair<int, int>>{{0, 5}});
    CHECK(one[0].bytes == 500 * M);
}

TEST_CASE("a device with three times the memory takes three times the layers", "[placement]") {
    CHECK(ranges(aff::split_layers(input(8, 100, {600, 200}))) == std::vector<std::pair<int, int>>{{0, 6}, {6, 8}});
    CHECK(ranges(aff::split_layers(input(8, 100, {2000, 2000, 4000}))) ==
          std::vector<std::pair<int, int>>{{0, 2}, {2, 4}, {4, 8}});
}

TEST_CASE("the embedding counts on the first device, the head on the last, activations on each", "[placement]") {
    LayerSplitInput in = input(6, 100, {500, 500});
    in.first_bytes = 200 * M;  // need 800 of 1000: each device filled to 400; the first has 200 left for layers
    const std::vector<LayerRange> r = aff::split_layers(in);
    CHECK(ranges(r) == std::vector<std::pair<int, int>>{{0, 2}, {2, 6}});
    CHECK(r[0].bytes == 400 * M);
    CHECK(r[1].bytes == 400 * M);
    in.first_bytes = 0;
    in.last_bytes = 200 * M;
    in.each_bytes = 10 * M;
    const std::vector<LayerRange> s = aff::split_layers(in);
    CHECK(ranges(s) == std::vector<std::pair<int, int>>{{0, 4}, {4, 6}});
    CHECK(s[0].bytes == 410 * M);
    CHECK(s[1].bytes == 410 * M);
}

TEST_CASE("every device runs at least one layer", "[placement]") {
    CHECK(ranges(aff::split_layers(input(2, 50, {1000, 100}))) == std::vector<std::pair<int, int>>{{0, 1}, {1, 2}});
    aff::ErrorKind kind{};
    CHECK(error_of(input(2, 10, {100, 100, 100}), kind) ==
          "3 GPUs for a model of 2 layers: at most 2 (each GPU runs at least one layer)");
    CHECK(kind == aff::ErrorKind::usage);
}

TEST_CASE("a model larger than the devices' memory names the MiB missing", "[placement]") {
    aff::ErrorKind kind{};
    CHECK(error_of(input(4, 100, {150, 150}), kind) ==
          "the model needs 400 MiB of GPU memory on 2 GPUs, 300 MiB available: 100 MiB missing");
    CHECK(kind == aff::ErrorKind::device);
    // Enough in all, but one layer larger than the second device: the split fails there.
    LayerSplitInput in = input(2, 100, {1000, 100});
    in.layer_bytes[1] = 300 * M;
    CHECK(error_of(in, kind) == "layer 1 on GPU 1: 300 MiB needed, 100 MiB available: 200 MiB missing");
    CHECK(kind == aff::ErrorKind::device);
}

TEST_CASE("a forced split is taken as given, checked against each device", "[placement]") {
    LayerSplitInput in = input(4, 100, {1000, 1000});
    in.forced = {1, 3};
    const std::vector<LayerRange> r = aff::split_layers(in);
    CHECK(ranges(r) == std::vector<std::pair<int, int>>{{0, 1}, {1, 4}});
    CHECK(r[1].bytes == 300 * M);
    aff::ErrorKind kind{};
    in.available[1] = 250 * M;
    CHECK(error_of(in, kind) == "layers 1-3 on GPU 1: 300 MiB needed, 250 MiB available: 50 MiB missing");
    CHECK(kind == aff::ErrorKind::device);
    in.forced = {2, 1};
    CHECK(error_of(in, kind) == "layer split: the counts cover 3 layers, the model has 4");
    CHECK(kind == aff::ErrorKind::usage);
    in.forced = {4, 0};
    CHECK(error_of(in, kind) == "layer split: every GPU runs at least one layer");
    in.forced = {4};
    CHECK(error_of(in, kind) == "layer split: 1 layer counts for 2 GPUs");
}
