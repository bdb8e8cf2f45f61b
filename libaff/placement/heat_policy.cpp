// The heat policy: LFU with exponential decay, the mover the reference engine uses. Each
// dispatch credits every distinct expert once, by the number of tokens that chose it, after
// decaying its heat by half every half_life_steps; heat is capped at lead_limit. After the
// dispatch its hottest misses are admitted while a slot is free, or in place of the coldest
// GPU resident when they beat it by the hysteresis fraction and by min_gain, at most
// min(max_moves, shadow_slots) a dispatch. Heats are compared in the log domain with the
// decay folded in (log2 heat + step / half life), so decaying costs nothing per step.
#include "libaff/core/error.hpp"
#include "libaff/placement/policy.hpp"
#include "libaff/placement/ranked_residents.hpp"

#include <algorithm>
#include <cmath>

namespace aff::placement {

namespace {

class HeatPolicy final : public Policy {
public:
    explicit HeatPolicy(const HeatOptions& o) : o_(o) {
        if (!(o.half_life_steps > 0)) throw_usage("--half-life must be above 0 steps");
        if (!(o.hysteresis >= 0) || !(o.min_gain >= 0)) throw_usage("--hysteresis and --min-gain must not be negative");
        if (!(o.lead_limit > 0)) throw_usage("--lead-limit must be above 0");
    }
    std::string_view name() const override { return "heat"; }
    void start(const Geometry& g, std::span<const Tier> tiers, std::uint32_t slots, std::span<const std::uint64_t>) override {
        // Every key starts cold (heat 2^-60, log key -60): the profile placed the residents,
        // and they keep their slots until misses earn more heat than they have.
        residents_.reset(g.keys(), tiers);
        log_heat_.assign(g.keys(), -60.0);
        for (std::uint32_t k = 0; k < g.keys(); ++k) residents_.set_score(k, {log_heat_[k], double(k)});
        slots_ = slots;
    }
    // Heat of `k` at `step`.
    double heat(ExpertKey k, double step) const { return std::exp2(log_heat_[k] - step / o_.half_life_steps); }

    void decide(const Dispatch& d, std::uint32_t free_slots, std::vector<Admission>& out) override {
        const double now = double(d.step);
        for (std::size_t i = 0; i < d.experts.size(); ++i) {
            const ExpertKey k = d.experts[i];
            const double h = std::min(o_.lead_limit, heat(k, now) + double(d.tokens[i]));
            log_heat_[k] = std::log2(h) + now / o_.half_life_steps;
            residents_.set_score(k, {log_heat_[k], double(k)});
        }
        if (slots_ == 0) return;
        candidates_.clear();
        for (std::size_t i = 0; i < d.experts.size(); ++i)
            if (d.tiers[i] != Tier::gpu) candidates_.push_back(d.experts[i]);
        std::sort(candidates_.begin(), candidates_.end(),
                  [&](ExpertKey a, ExpertKey b) { return log_heat_[a] > log_heat_[b] || (log_heat_[a] == log_heat_[b] && a < b); });
        const std::uint32_t budget = std::min(o_.max_moves, o_.shadow_slots);
        std::uint32_t moves = 0;
        for (ExpertKey x : candidates_) {
            if (moves >= budget) break;
            Admission a{x, false, 0};
            if (free_slots > 0) {
                --free_slots;
            } else {
                const ExpertKey v = residents_.victim();
                const double hx = heat(x, now), hv = heat(v, now);
                if (!(hx > hv * (1 + o_.hysteresis) && hx - hv >= o_.min_gain)) break;  // colder candidates fail too
                a.evicts = true;
                a.evict = v;
                residents_.erase(v);
            }
            residents_.set_score(x, {log_heat_[x], double(x)});
            residents_.insert(x);
            out.push_back(a);
            ++moves;
        }
    }

private:
    HeatOptions o_;
    RankedResidents residents_;
    std::vector<double> log_heat_;
    std::vector<ExpertKey> candidates_;
    std::uint32_t slots_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_heat_policy(const HeatOptions& options) { return std::make_unique<HeatPolicy>(options); }

}  // namespace aff::placement
