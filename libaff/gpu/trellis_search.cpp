// GPU BlockSearch (trellis_search.hpp): uploads a batch's targets and the matrix's position
// weights, runs kernels/trellis_encode.hip and brings the windows back. Batches are cut into
// chunks of at most kChunk blocks so device memory stays bounded (about 100 MiB a lane).
// start() runs the same on a thread of its own, so aff-quantize's threads prepare and finish
// other matrices meanwhile; search() has its own stream and buffers (a lane), so it may run
// while a started search is under way (the rotation choice's sample rows).
#include "libaff/gpu/trellis_search.hpp"

#include "libaff/core/error.hpp"
#include "libaff/gpu/device.hpp"
#include "kernels/trellis_encode.hpp"

#include <algorithm>
#include <future>
#include <string>
#include <vector>

namespace aff::gpu {
namespace {

constexpr std::size_t kChunk = std::size_t{1} << 16;  // blocks per launch (64 MiB of targets)

// The device memory and stream of one search at a time.
struct Lane {
    Stream stream;
    // What run() waits on: sleeping, not spinning, since the pool needs every core meanwhile.
    Event done{true};
    Buffer y, index, windows, q;

    void reserve() {
        if (y.size()) return;
        y = Buffer(kChunk * quant::kBlockWeights * sizeof(float));
        index = Buffer(kChunk * sizeof(std::uint32_t));
        windows = Buffer(kChunk * quant::kBlockSteps * sizeof(std::uint16_t));
    }
};

class GpuTrellisSearch final : public quant::BlockSearch {
public:
    // Members are made in order, the first one making the device current for the rest.
    GpuTrellisSearch(int ordinal, int blocks_per_sm)
        : ordinal_(current(ordinal)),
          blocks_per_sm_(blocks_per_sm),
          info_(device_info(ordinal)),
          tables_(kTrellisTableFloats * sizeof(float)) {}

    ~GpuTrellisSearch() override {
        if (running_.valid()) try {
                running_.get();
            } catch (...) {  // nobody is left to read the error
            }
    }

    std::string describe() const override {
        return "GPU " + std::to_string(info_.ordinal) + " (" + info_.name + ")";
    }

    void search(const quant::Codebook& cb, const float* y, std::size_t blocks, const float* q, std::size_t q_blocks,
                const std::uint32_t* q_index, std::uint16_t* windows) override {
        use_device(ordinal_);
        load_tables(cb, foreground_);
        run(foreground_, y, blocks, q, q_blocks, q_index, windows);
    }

    void start(const quant::Codebook& cb, const float* y, std::size_t blocks, const float* q, std::size_t q_blocks,
               const std::uint32_t* q_index, std::uint16_t* windows) override {
        if (running_.valid()) throw_internal("trellis search: start while a started search is under way");
        use_device(ordinal_);
        load_tables(cb, background_);
        running_ = std::async(std::launch::async, [=, this] {
            use_device(ordinal_);
            run(background_, y, blocks, q, q_blocks, q_index, windows);
        });
    }

    void wait() override {
        if (!running_.valid()) return;
        std::future<void> done = std::move(running_);
        done.get();
    }

private:
    static int current(int ordinal) {
        use_device(ordinal);
        return ordinal;
    }

    // Called from the thread that starts searches, never while a started one runs with
    // other tables (it waits for that one first).
    void load_tables(const quant::Codebook& cb, const Lane& lane) {
        if (has_tables_ && digest_ == cb.digest()) return;
        wait();
        std::vector<float> host(kTrellisTableFloats);
        trellis_tables(cb.coord0(), cb.coord1(), host.data());
        lane.stream.copy(tables_.data(), host.data(), host.size() * sizeof(float));
        lane.stream.synchronize();
        digest_ = cb.digest();
        has_tables_ = true;
    }

    void run(Lane& lane, const float* y, std::size_t blocks, const float* q, std::size_t q_blocks,
             const std::uint32_t* q_index, std::uint16_t* windows) {
        lane.reserve();
        const std::size_t q_bytes = q_blocks * quant::kBlockWeights * sizeof(float);
        if (lane.q.size() < q_bytes) lane.q = Buffer(q_bytes);
        lane.stream.copy(lane.q.data(), q, q_bytes);
        for (std::size_t first = 0; first < blocks; first += kChunk) {
            const std::size_t n = std::min(kChunk, blocks - first);
            lane.stream.copy(lane.y.data(), y + first * quant::kBlockWeights, n * quant::kBlockWeights * sizeof(float));
            lane.stream.copy(lane.index.data(), q_index + first, n * sizeof(std::uint32_t));
            trellis_search(tables_.as<float>(), lane.y.as<float>(), lane.q.as<float>(), lane.index.as<std::uint32_t>(),
                           lane.windows.as<std::uint16_t>(), static_cast<int>(n), lane.stream.handle(),
                           blocks_per_sm_);
            lane.stream.copy(windows + first * quant::kBlockSteps, lane.windows.data(),
                             n * quant::kBlockSteps * sizeof(std::uint16_t));
            lane.done.record(lane.stream);  // the host buffers of this chunk are reused by the next
            lane.done.synchronize();
        }
    }

    int ordinal_;
    int blocks_per_sm_;
    DeviceInfo info_;
    Buffer tables_;
    Lane foreground_, background_;  // search(), start()
    std::future<void> running_;
    std::uint64_t digest_ = 0;
    bool has_tables_ = false;
};

}  // namespace

std::unique_ptr<quant::BlockSearch> open_trellis_search(int ordinal, int blocks_per_sm) {
    return std::make_unique<GpuTrellisSearch>(ordinal, blocks_per_sm);
}

}  // namespace aff::gpu
