// CpuMtpRunner (cpu_mtp_runner.hpp).
#include "libaff/runtime/cpu_mtp_runner.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>

namespace aff {

CpuMtpRunner::CpuMtpRunner(const Model& model, CpuSequence& trunk)
    : model_(model), trunk_(trunk),
      row_(std::size_t(model.config().hc_mult) * std::size_t(model.config().hidden_size)),
      window_(std::size_t(model.config().sliding_window)) {
    if (!model.has_mtp()) throw_unsupported("the model has no MTP layer to draft with");
    state_ = model.new_state();
    state_.layers.clear();  // the trunk's state is the sequence's, not ours
    empty_mtp_ = state_.mtp;
    store_.assign(window_ * row_, 0.0f);
    trunk_.set_stream_observer(this);
}

CpuMtpRunner::~CpuMtpRunner() { trunk_.set_stream_observer(nullptr); }

void CpuMtpRunner::on_streams(std::int64_t start, std::size_t n, std::span<const float> streams) {
    if (!listener_) return;
    call_ = streams;
    listener_->on_trunk_call(start, n);
    call_ = {};
}

void CpuMtpRunner::keep(std::int64_t position, std::size_t from_row, std::size_t n) {
    if (n > window_ || (from_row + n) * row_ > call_.size()) throw_internal("CpuMtpRunner::keep: rows outside the call");
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t slot = std::size_t(position + std::int64_t(i)) % window_;
        std::copy_n(call_.begin() + std::ptrdiff_t((from_row + i) * row_), row_,
                    store_.begin() + std::ptrdiff_t(slot * row_));
    }
}

void CpuMtpRunner::restart(std::int64_t position) {
    state_.mtp = empty_mtp_;
    state_.mtp_position = position;
}

std::vector<float> CpuMtpRunner::run(std::span<const std::int32_t> next_tokens) {
    const std::size_t n = next_tokens.size();
    if (n == 0 || n > window_) throw_internal("CpuMtpRunner::run: outside the stored window");
    rows_.resize(n * row_);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t slot = std::size_t(state_.mtp_position + std::int64_t(i)) % window_;
        std::copy_n(store_.begin() + std::ptrdiff_t(slot * row_), row_, rows_.begin() + std::ptrdiff_t(i * row_));
    }
    std::vector<float> streams;
    state_.routes = trunk_.state().routes;  // the trunk's route observer (a trace), as its last call had it
    std::vector<float> logits = model_.mtp_forward(state_, rows_, next_tokens, false, &streams);
    out_.assign(streams.end() - std::ptrdiff_t(row_), streams.end());
    return logits;
}

std::vector<float> CpuMtpRunner::chain(std::int32_t token) {
    const std::int32_t last[1] = {token};
    std::vector<float> streams;
    state_.routes = trunk_.state().routes;
    std::vector<float> logits = model_.mtp_forward(state_, out_, last, false, &streams);
    out_ = std::move(streams);
    return logits;
}

void CpuMtpRunner::restore_ring(std::int64_t position) {
    state_.mtp[0].ring.swap(saved_);
    state_.mtp_position = position;
}

}  // namespace aff
