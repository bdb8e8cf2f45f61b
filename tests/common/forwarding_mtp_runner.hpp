// A runner that forwards every MtpRunner call to `inner` except greedy_chain and sampled_chain
// (MtpRunner's defaults: none), so that the MTP tests (tests/unit/runtime/mtp_drafter_test.cpp
// on the CPU, tests/gpu/mtp_run.hpp on the device) can set a runner's own chains, or their
// absence, beside the same backend.
#pragma once

#include "libaff/runtime/mtp_runner.hpp"

#include <memory>
#include <utility>

namespace aff::test {

class ForwardingMtpRunner : public MtpRunner {
public:
    explicit ForwardingMtpRunner(std::unique_ptr<MtpRunner> inner) : inner_(std::move(inner)) {}
    std::size_t vocab_size() const override { return inner_->vocab_size(); }
    std::size_t window() const override { return inner_->window(); }
    std::int64_t trunk_position() const override { return inner_->trunk_position(); }
    void listen(TrunkCallListener* l) override { inner_->listen(l); }
    void keep(std::int64_t position, std::size_t from_row, std::size_t n) override { inner_->keep(position, from_row, n); }
    std::int64_t position() const override { return inner_->position(); }
    void restart(std::int64_t position) override { inner_->restart(position); }
    std::vector<float> run(std::span<const std::int32_t> next) override { return inner_->run(next); }
    std::vector<float> chain(std::int32_t token) override { return inner_->chain(token); }
    void save_ring() override { inner_->save_ring(); }
    void restore_ring(std::int64_t position) override { inner_->restore_ring(position); }
    std::vector<float> ring() const override { return inner_->ring(); }

protected:
    MtpRunner& inner() { return *inner_; }

private:
    std::unique_ptr<MtpRunner> inner_;
};

}  // namespace aff::test
