// Belady's MIN with bypass, the offline optimum and the bound on every other policy's GPU
// hits: after a dispatch each miss is admitted while a slot is free, else in place of the
// resident whose next use is farthest, but only when the miss is needed sooner than that
// resident (otherwise caching it would cost a hit). Optimal for the hit count because
// every policy admits only misses of the dispatch it saw, and all experts are one size.
#include "libaff/placement/policy.hpp"
#include "libaff/placement/ranked_residents.hpp"

#include <algorithm>

namespace aff::placement {

namespace {

class BeladyPolicy final : public Policy {
public:
    std::string_view name() const override { return "belady"; }
    bool needs_future() const override { return true; }
    void start(const Geometry& g, std::span<const Tier> tiers, std::uint32_t slots,
               std::span<const std::uint64_t> first_use) override {
        residents_.reset(g.keys(), tiers);
        for (std::uint32_t k = 0; k < g.keys(); ++k) residents_.set_score(k, {score(first_use[k]), double(k)});
        slots_ = slots;
    }

    void decide(const Dispatch& d, std::uint32_t free_slots, std::vector<Admission>& out) override {
        for (std::size_t i = 0; i < d.experts.size(); ++i)
            residents_.set_score(d.experts[i], {score(d.next_use[i]), double(d.experts[i])});
        if (slots_ == 0) return;
        order_.clear();
        for (std::size_t i = 0; i < d.experts.size(); ++i)
            if (d.tiers[i] != Tier::gpu && d.next_use[i] != kNever) order_.push_back(i);
        std::sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return d.next_use[a] < d.next_use[b]; });
        for (std::size_t i : order_) {
            const ExpertKey x = d.experts[i];
            Admission a{x, false, 0};
            if (free_slots > 0) {
                --free_slots;
            } else {
                const ExpertKey v = residents_.victim();
                if (!(residents_.score(v) < residents_.score(x))) break;  // later misses are needed later still
                a.evicts = true;
                a.evict = v;
                residents_.erase(v);
            }
            residents_.insert(x);
            out.push_back(a);
        }
    }

private:
    static double score(std::uint64_t next) { return next == kNever ? -1e300 : -double(next); }
    RankedResidents residents_;
    std::vector<std::size_t> order_;
    std::uint32_t slots_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_belady_policy() { return std::make_unique<BeladyPolicy>(); }

}  // namespace aff::placement
