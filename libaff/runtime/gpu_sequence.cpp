// GpuSequence (gpu_sequence.hpp). The whole file is for GPU builds: the CPU-only build has no
// GpuModel to wrap.
#include "libaff/runtime/gpu_sequence.hpp"

#if defined(AFF_HAVE_GPU)
#include "libaff/core/error.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/undo_log.hpp"

namespace aff {
namespace {

// The bytes of the device state that matter at the snapshot's position, in host memory
// (GpuModel::snapshot), or the CPU attention's state: the budget counts what is held.
class GpuSnapshot final : public SequenceSnapshot {
public:
    explicit GpuSnapshot(gpu::GpuStateSnapshot s) : state(std::move(s)) {}
    std::int64_t position() const override { return state.position; }
    std::size_t bytes() const override { return state.device.size() + host_state_bytes(state.attention) + sizeof(*this); }
    gpu::GpuStateSnapshot state;
};

// What one forward call is about to overwrite, copied device to device (GpuModel::rewind_point):
// the ring rows its positions take and the compressors' windows, not the whole state.
class GpuUndo final : public UndoLogSequence::UndoRecord {
public:
    explicit GpuUndo(gpu::GpuRewindPoint p) : point(std::move(p)) {}
    gpu::GpuRewindPoint point;
};

// The tiers' counters of a tiered model's report (tier_stats.hpp).
TierStats stats_of(const gpu::GpuTierReport& r) {
    TierStats t;
    t.tokens = r.tokens;
    t.expert_reads = r.counters.accesses;
    t.gpu_hits = r.counters.gpu_hits;
    t.host_hits = r.counters.host_hits;
    t.ssd_reads = r.counters.ssd_reads;
    t.pcie_bytes = r.counters.pcie_bytes;
    t.ssd_bytes = r.counters.ssd_bytes;
    t.moves = r.moves;
    t.moved_bytes = r.moved_bytes;
    t.stall_seconds = r.stall_seconds;
    t.stalled_calls = r.stalled_calls;
    t.gpu_experts = r.on_gpu;
    t.host_experts = r.in_pool;
    t.ssd_experts = r.plan.ssd_experts;
    t.prefetched = r.prefetched_experts;
    t.prefetch_hits = r.prefetch_hits;
    return t;
}

class GpuSequence final : public UndoLogSequence, public GpuTrunk {
public:
    GpuSequence(const Model& m, const TensorReader* weights, const gpu::GpuOptions& o)
        : model_(m, weights, o), state_(model_.new_state()) {}
    bool on_gpu() const override { return true; }
    std::string describe() const override {
        std::string s;
        for (int d : model_.devices())
            s += (s.empty() ? "GPU " : ", GPU ") + std::to_string(d) + " (" + gpu::device_info(d).name + ")";
        return s + "; " + model_.describe();
    }
    std::string placement_summary() const override { return model_.tiers().summary(); }
    void set_route_observer(RouteObserver* observer) override { model_.set_route_observer(observer); }
    gpu::GpuModel& gpu_model() override { return model_; }
    void set_call_listener(TrunkCallListener* listener) override { listener_ = listener; }
    void set_tap_listener(TapListener* listener) override {
        model_.set_taps(listener != nullptr);
        taps_ = listener;
    }
    std::optional<TierStats> tier_stats() const override {
        const gpu::GpuTierReport r = model_.tiers();
        if (!r.tiered) return std::nullopt;
        return stats_of(r);
    }
    ExpertTierSnapshot expert_tiers() const override {
        const gpu::GpuTierReport r = model_.tiers();
        ExpertTierSnapshot s;
        s.tiered = r.tiered;
        s.why = r.why;
        if (!r.tiered) return s;
        s.strategy = r.strategy;
        s.counters = stats_of(r);
        s.has_ssd_tier = r.plan.ssd_experts > 0;
        s.layers = model_.config().num_layers;
        s.experts = model_.config().n_routed_experts;
        s.where = model_.expert_tier_map();
        return s;
    }
    std::size_t vocab_size() const override { return static_cast<std::size_t>(model_.config().vocab_size); }
    std::int64_t position() const override { return state_.position; }
    void reset() override {
        state_ = model_.new_state();
        forget_history();
    }
    bool can_snapshot() const override { return true; }
    std::unique_ptr<SequenceSnapshot> snapshot() const override {
        return std::make_unique<GpuSnapshot>(model_.snapshot(state_));
    }
    void restore(const SequenceSnapshot& snapshot) override {
        const auto* s = dynamic_cast<const GpuSnapshot*>(&snapshot);
        if (!s) throw_usage("restore: the snapshot was not taken by the GPU backend");
        model_.restore(state_, s->state);
        forget_history();
    }

private:
    std::unique_ptr<UndoRecord> take_undo(std::span<const std::int32_t> tokens) const override {
        if (spare_.empty())
            return std::make_unique<GpuUndo>(model_.rewind_point(state_, static_cast<int>(tokens.size())));
        std::unique_ptr<GpuUndo> undo = std::move(spare_.back());
        spare_.pop_back();
        model_.rewind_point(state_, static_cast<int>(tokens.size()), undo->point);  // its buffers reused
        return undo;
    }
    void apply_undo(const UndoRecord& record) override {
        model_.rewind(state_, static_cast<const GpuUndo&>(record).point);
    }
    void recycle(std::unique_ptr<UndoRecord> record) override {
        // A verify call and its replay hold two records at once, more with a deeper log:
        // a few spares cover any depth a drafter asks for.
        if (spare_.size() < kSpareRecords)
            spare_.emplace_back(static_cast<GpuUndo*>(record.release()));
    }
    // One call of the model (forward or forward_ids), with what every call needs around it.
    template <class Forward>
    auto call(std::span<const std::int32_t> tokens, Forward forward) {
        const std::int64_t start = state_.position;
        // While the generation loop keeps undo records (it drafts: these are verify calls and
        // their replays), calls take the GEMVs, whose rows round as a single step's do, so a
        // greedy verify call chooses what single steps would.
        model_.set_gemv_calls(rewind_depth() > 0);
        auto out = forward();
        if (listener_) listener_->on_trunk_call(start, tokens.size());  // the call's streams are still there
        if (taps_) taps_->on_taps(start, tokens.size(), model_.last_taps());
        return out;
    }
    std::vector<float> run(std::span<const std::int32_t> tokens, bool all_logits) override {
        return call(tokens, [&] { return model_.forward(state_, tokens, all_logits); });
    }
    std::vector<std::int32_t> run_ids(std::span<const std::int32_t> tokens, bool all_rows, std::size_t candidates,
                                      const RowSampling* sampling) override {
        if (!sampling) return call(tokens, [&] { return model_.forward_ids(state_, tokens, all_rows, candidates); });
        // The drawn picks on the device: a verify call's guesses against the drafter's q rows
        // where its chain left them there, else against its host rows, copied up.
        gpu::RowDraws draws;
        draws.temperature = sampling->temperature;
        draws.uniforms = sampling->uniforms;
        std::vector<float> host_q;
        if (sampling->draft && all_rows && tokens.size() > 1) {
            draws.guesses = tokens.size() - 1;
            draws.q_from_last_chain = sampling->draft->draft_on_device();
            if (!draws.q_from_last_chain) {
                for (std::size_t j = 0; j < draws.guesses; ++j) {
                    const std::span<const float> q = sampling->draft->draft_distribution(j);
                    host_q.insert(host_q.end(), q.begin(), q.end());
                }
                draws.q = host_q;
            }
        }
        return call(tokens, [&] { return model_.forward_ids(state_, tokens, all_rows, candidates, &draws); });
    }

    static constexpr std::size_t kSpareRecords = 8;
    gpu::GpuModel model_;
    gpu::GpuDecodeState state_;
    mutable std::vector<std::unique_ptr<GpuUndo>> spare_;
    TrunkCallListener* listener_ = nullptr;
    TapListener* taps_ = nullptr;
};

}  // namespace

std::unique_ptr<Sequence> make_gpu_sequence(const Model& cpu, const TensorReader* weights, const gpu::GpuOptions& options) {
    return std::make_unique<GpuSequence>(cpu, weights, options);
}

}  // namespace aff
#endif
