// GPU BlockSearch (trellis_search.hpp): uploads a batch's targets and the matrix's position
// weights, runs kernels/trellis_encode.hip and brings the windows back. Batches are cut into
// chunks of at most kChunk blocks so device memory stays bounded (about 100 MiB).
#include "aff/gpu/trellis_search.hpp"

#include "aff/gpu/device.hpp"
#include "kernels/trellis_encode.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace aff::gpu {
namespace {

constexpr std::size_t kChunk = std::size_t{1} << 16;  // blocks per launch (64 MiB of targets)

class GpuTrellisSearch final : public quant::BlockSearch {
public:
    // Members are made in order, the first one making the device current for the rest.
    GpuTrellisSearch(int ordinal, int blocks_per_sm)
        : ordinal_(current(ordinal)),
          blocks_per_sm_(blocks_per_sm),
          info_(device_info(ordinal)),
          tables_(kTrellisTableFloats * sizeof(float)),
          y_(kChunk * quant::kBlockWeights * sizeof(float)),
          index_(kChunk * sizeof(std::uint32_t)),
          windows_(kChunk * quant::kBlockSteps * sizeof(std::uint16_t)) {}

    std::string describe() const override {
        return "GPU " + std::to_string(info_.ordinal) + " (" + info_.name + ")";
    }

    void search(const quant::Codebook& cb, const float* y, std::size_t blocks, const float* q, std::size_t q_blocks,
                const std::uint32_t* q_index, std::uint16_t* windows) override {
        use_device(ordinal_);
        if (!has_tables_ || digest_ != cb.digest()) {
            std::vector<float> host(kTrellisTableFloats);
            trellis_tables(cb.coord0(), cb.coord1(), host.data());
            stream_.copy(tables_.data(), host.data(), host.size() * sizeof(float));
            stream_.synchronize();
            digest_ = cb.digest();
            has_tables_ = true;
        }
        const std::size_t q_bytes = q_blocks * quant::kBlockWeights * sizeof(float);
        if (q_.size() < q_bytes) q_ = Buffer(q_bytes);
        stream_.copy(q_.data(), q, q_bytes);
        for (std::size_t first = 0; first < blocks; first += kChunk) {
            const std::size_t n = std::min(kChunk, blocks - first);
            stream_.copy(y_.data(), y + first * quant::kBlockWeights, n * quant::kBlockWeights * sizeof(float));
            stream_.copy(index_.data(), q_index + first, n * sizeof(std::uint32_t));
            trellis_search(tables_.as<float>(), y_.as<float>(), q_.as<float>(), index_.as<std::uint32_t>(),
                           windows_.as<std::uint16_t>(), static_cast<int>(n), stream_.handle(), blocks_per_sm_);
            stream_.copy(windows + first * quant::kBlockSteps, windows_.data(),
                         n * quant::kBlockSteps * sizeof(std::uint16_t));
            stream_.synchronize();  // the host buffers of this chunk are reused by the next
        }
    }

private:
    static int current(int ordinal) {
        use_device(ordinal);
        return ordinal;
    }

    int ordinal_;
    int blocks_per_sm_;
    DeviceInfo info_;
    Stream stream_;
    Buffer tables_, y_, q_, index_, windows_;
    std::uint64_t digest_ = 0;
    bool has_tables_ = false;
};

}  // namespace

std::unique_ptr<quant::BlockSearch> open_trellis_search(int ordinal, int blocks_per_sm) {
    return std::make_unique<GpuTrellisSearch>(ordinal, blocks_per_sm);
}

}  // namespace aff::gpu
