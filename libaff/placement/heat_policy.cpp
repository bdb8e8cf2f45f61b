// The heat policy: LFU with exponential decay, the mover the reference engine uses. Each
// dispatch credits every distinct expert once, by tokens^token_weight (the tokens that chose
// it), after decaying its heat by half every half_life_steps; heat is capped at lead_limit.
// Every expert has a heat, resident or not, so a streamed miss competes with what it would
// replace. After the dispatch its hottest misses are admitted while a slot is free, or in
// place of the coldest GPU resident when they beat it by the hysteresis fraction and by
// min_gain, at most min(max_moves, shadow_slots) a dispatch. Heats are compared in the log
// domain with the decay folded in (log2 heat + step / half life), so decaying costs nothing
// per step and the residents' order only changes when one is credited.
//
// The oracle variants (policy.hpp HeatOracle) swap one decision for the offline answer; they
// exist to measure where heat loses to Belady and share everything else with the policy.
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
        if (!(o.token_weight >= 0 && o.token_weight <= 1)) throw_usage("--token-weight must be from 0 to 1");
    }
    std::string_view name() const override { return "heat"; }
    bool needs_future() const override { return o_.oracle != HeatOracle::none; }
    void start(const Geometry& g, std::span<const Tier> tiers, std::uint32_t slots,
               std::span<const std::uint64_t> first_use) override {
        // Every key starts cold (heat 2^-60, log key -60): the profile placed the residents,
        // and they keep their slots until misses earn more heat than they have.
        residents_.reset(g.keys(), tiers);
        log_heat_.assign(g.keys(), -60.0);
        for (std::uint32_t k = 0; k < g.keys(); ++k) residents_.set_score(k, {log_heat_[k], double(k)});
        if (needs_future()) {
            next_use_.assign(first_use.begin(), first_use.end());
            by_next_use_.reset(g.keys(), tiers);
            for (std::uint32_t k = 0; k < g.keys(); ++k) by_next_use_.set_score(k, next_use_score(k));
        }
        slots_ = slots;
    }
    // Heat of `k` at `step`.
    double heat(ExpertKey k, double step) const { return std::exp2(log_heat_[k] - step / o_.half_life_steps); }

    void decide(const Dispatch& d, std::uint32_t free_slots, std::vector<Admission>& out) override {
        const double now = double(d.step);
        for (std::size_t i = 0; i < d.experts.size(); ++i) {
            const ExpertKey k = d.experts[i];
            const double credit = o_.token_weight == 1 ? double(d.tokens[i]) : std::pow(double(d.tokens[i]), o_.token_weight);
            const double h = std::min(o_.lead_limit, heat(k, now) + credit);
            log_heat_[k] = std::log2(h) + now / o_.half_life_steps;
            residents_.set_score(k, {log_heat_[k], double(k)});
            if (needs_future()) {
                next_use_[k] = d.next_use[i];
                by_next_use_.set_score(k, next_use_score(k));
            }
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
                const ExpertKey v = o_.oracle == HeatOracle::eviction ? by_next_use_.victim() : residents_.victim();
                if (o_.oracle == HeatOracle::admission) {
                    if (!(next_use_[x] < next_use_[v])) continue;  // a colder candidate may still be needed sooner
                } else if (!beats(x, v, now)) {
                    if (o_.oracle == HeatOracle::none) break;  // colder candidates fail against the coldest too
                    continue;
                }
                a.evicts = true;
                a.evict = v;
                residents_.erase(v);
                if (needs_future()) by_next_use_.erase(v);
            }
            residents_.insert(x);
            if (needs_future()) by_next_use_.insert(x);
            out.push_back(a);
            ++moves;
        }
    }

private:
    // The admission test: the candidate's heat exceeds the victim's by the hysteresis
    // fraction and by min_gain.
    bool beats(ExpertKey x, ExpertKey v, double now) const {
        const double hx = heat(x, now), hv = heat(v, now);
        return hx > hv * (1 + o_.hysteresis) && hx - hv >= o_.min_gain;
    }
    RankedResidents::Score next_use_score(ExpertKey k) const {
        return {next_use_[k] == kNever ? -1e300 : -double(next_use_[k]), double(k)};
    }

    HeatOptions o_;
    RankedResidents residents_;    // by heat
    RankedResidents by_next_use_;  // oracle variants: by next use (the victim is needed last)
    std::vector<double> log_heat_;
    std::vector<std::uint64_t> next_use_;
    std::vector<ExpertKey> candidates_;
    std::uint32_t slots_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_heat_policy(const HeatOptions& options) { return std::make_unique<HeatPolicy>(options); }

}  // namespace aff::placement
