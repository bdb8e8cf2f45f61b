// split_layers (layer_split.hpp): a greedy walk over the layers that fills each device to the
// same fraction of its memory, then checks every device's total against what it has.
#include "libaff/placement/layer_split.hpp"

#include "libaff/core/error.hpp"

#include <numeric>

namespace aff {
namespace {

std::string mib(std::size_t b) { return std::to_string((b + (std::size_t(1) << 20) - 1) >> 20); }

std::string layers_text(const LayerRange& r) {
    return r.end - r.first == 1 ? "layer " + std::to_string(r.first)
                                : "layers " + std::to_string(r.first) + "-" + std::to_string(r.end - 1);
}

}  // namespace

std::vector<LayerRange> split_layers(const LayerSplitInput& in) {
    const int L = static_cast<int>(in.layer_bytes.size()), N = static_cast<int>(in.available.size());
    if (N < 1) throw_usage("layer split: no device");
    auto name = [&](int d) { return d < int(in.names.size()) ? in.names[d] : "device " + std::to_string(d); };
    if (L < N)
        throw_usage(std::to_string(N) + " GPUs for a model of " + std::to_string(L) + " layers: at most " +
                    std::to_string(L) + " (each GPU runs at least one layer)");
    std::vector<std::size_t> fixed(N, in.each_bytes);
    fixed[0] += in.first_bytes;
    fixed[N - 1] += in.last_bytes;
    const std::size_t layers_total = std::accumulate(in.layer_bytes.begin(), in.layer_bytes.end(), std::size_t(0));
    const std::size_t need = layers_total + std::accumulate(fixed.begin(), fixed.end(), std::size_t(0));
    const std::size_t have = std::accumulate(in.available.begin(), in.available.end(), std::size_t(0));

    std::vector<int> counts(N, 0);
    if (!in.forced.empty()) {
        if (int(in.forced.size()) != N)
            throw_usage("layer split: " + std::to_string(in.forced.size()) + " layer counts for " + std::to_string(N) +
                        " GPUs");
        int sum = 0;
        for (int k : in.forced) {
            if (k < 1) throw_usage("layer split: every GPU runs at least one layer");
            sum += k;
        }
        if (sum != L)
            throw_usage("layer split: the counts cover " + std::to_string(sum) + " layers, the model has " +
                        std::to_string(L));
        counts = in.forced;
    } else {
        if (need > have)
            throw Error(ErrorKind::device, "the model needs " + mib(need) + " MiB of GPU memory on " +
                                               std::to_string(N) + " GPUs, " + mib(have) + " MiB available: " +
                                               mib(need - have) + " MiB missing");
        // Device d's target: the same fraction (need / have) of its memory, less its fixed
        // part; a layer goes to the next device once the running total passes the target's
        // end by more than half the layer, or once it would not fit.
        const double fill = have > 0 ? double(need) / double(have) : 1.0;
        double target_end = 0.0, done = 0.0;
        int d = 0;
        std::size_t used = 0;
        target_end = double(in.available[0]) * fill - double(fixed[0]);
        for (int l = 0; l < L; ++l) {
            const std::size_t b = in.layer_bytes[l];
            if (d < N - 1 && counts[d] > 0) {
                const bool leave_one_each = L - l <= N - 1 - d;
                const bool no_room = used + b + fixed[d] > in.available[d];
                const bool past_target = done + double(b) / 2 > target_end;
                if (leave_one_each || no_room || past_target) {
                    ++d;
                    used = 0;
                    target_end += double(in.available[d]) * fill - double(fixed[d]);
                }
            }
            ++counts[d];
            used += b;
            done += double(b);
        }
    }

    std::vector<LayerRange> out(N);
    int l = 0;
    for (int d = 0; d < N; ++d) {
        out[d].first = l;
        out[d].bytes = fixed[d];
        for (int k = 0; k < counts[d]; ++k) out[d].bytes += in.layer_bytes[l++];
        out[d].end = l;
    }
    for (int d = 0; d < N; ++d)
        if (out[d].bytes > in.available[d])
            throw Error(ErrorKind::device, layers_text(out[d]) + " on " + name(d) + ": " + mib(out[d].bytes) +
                                               " MiB needed, " + mib(in.available[d]) + " MiB available: " +
                                               mib(out[d].bytes - in.available[d]) + " MiB missing");
    return out;
}

}  // namespace aff
