// The comparison policies and the factory: static (profile order, nothing moves), demand
// (admit every miss, evict the oldest admission: FIFO), LRU (evict the least recently
// used) and LFU (evict the least often used, counting each dispatch once). The heat policy
// is heat_policy.cpp, Belady's MIN belady_policy.cpp.
#include "libaff/core/error.hpp"
#include "libaff/placement/policy.hpp"
#include "libaff/placement/ranked_residents.hpp"

#include <array>
#include <string>

namespace aff::placement {

std::unique_ptr<Policy> make_heat_policy(const HeatOptions& options);
std::unique_ptr<Policy> make_belady_policy();

namespace {

class StaticPolicy final : public Policy {
public:
    std::string_view name() const override { return "static"; }
    void start(const Geometry&, std::span<const Tier>, std::uint32_t, std::span<const std::uint64_t>) override {}
    void decide(const Dispatch&, std::uint32_t, std::vector<Admission>&) override {}
};

// Admits every miss; the score (set on each access and admission) picks the victim.
class ScoredPolicy : public Policy {
public:
    void start(const Geometry& g, std::span<const Tier> tiers, std::uint32_t slots, std::span<const std::uint64_t>) override {
        residents_.reset(g.keys(), tiers);
        slots_ = slots;
        count_.assign(g.keys(), 0);
    }
    void decide(const Dispatch& d, std::uint32_t free_slots, std::vector<Admission>& out) override {
        for (std::size_t i = 0; i < d.experts.size(); ++i) {
            ++count_[d.experts[i]];
            on_access(d, i);
        }
        if (slots_ == 0) return;
        for (std::size_t i = 0; i < d.experts.size(); ++i) {
            const ExpertKey x = d.experts[i];
            if (d.tiers[i] == Tier::gpu) continue;
            Admission a{x, false, 0};
            if (free_slots > 0) {
                --free_slots;
            } else {
                a.evicts = true;
                a.evict = residents_.victim();
                residents_.erase(a.evict);
            }
            on_admit(d, x);
            residents_.insert(x);
            out.push_back(a);
        }
    }

protected:
    virtual void on_access(const Dispatch& d, std::size_t i) = 0;
    virtual void on_admit(const Dispatch&, ExpertKey) {}
    RankedResidents residents_;
    std::vector<std::uint64_t> count_;
    std::uint32_t slots_ = 0;
};

class DemandPolicy final : public ScoredPolicy {
public:
    std::string_view name() const override { return "demand"; }

private:
    void on_access(const Dispatch&, std::size_t) override {}
    void on_admit(const Dispatch& d, ExpertKey x) override { residents_.set_score(x, {double(d.index), double(x)}); }
};

class LruPolicy final : public ScoredPolicy {
public:
    std::string_view name() const override { return "lru"; }

private:
    void on_access(const Dispatch& d, std::size_t i) override {
        residents_.set_score(d.experts[i], {double(d.index), double(i)});
    }
};

class LfuPolicy final : public ScoredPolicy {
public:
    std::string_view name() const override { return "lfu"; }

private:
    void on_access(const Dispatch& d, std::size_t i) override {
        residents_.set_score(d.experts[i], {double(count_[d.experts[i]]), double(d.index)});
    }
};

constexpr std::array<std::string_view, 6> kNames = {"heat", "demand", "static", "lru", "lfu", "belady"};

}  // namespace

std::span<const std::string_view> policy_names() { return kNames; }

std::unique_ptr<Policy> make_policy(std::string_view name, const HeatOptions& heat) {
    if (name == "heat") return make_heat_policy(heat);
    if (name == "demand") return std::make_unique<DemandPolicy>();
    if (name == "static") return std::make_unique<StaticPolicy>();
    if (name == "lru") return std::make_unique<LruPolicy>();
    if (name == "lfu") return std::make_unique<LfuPolicy>();
    if (name == "belady") return make_belady_policy();
    throw_usage("unknown placement policy \"" + std::string(name) + "\" (heat, demand, static, lru, lfu, belady)");
}

}  // namespace aff::placement
