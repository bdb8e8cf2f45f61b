// The expert tiers in GpuModel (expert_tiers.hpp): planning and filling them at load, the
// mover between calls, and the report (GpuModel::tiers).
#include "libaff/core/error.hpp"
#include "libaff/core/host_memory.hpp"
#include "libaff/core/units.hpp"
#include "libaff/gpu/forward_impl.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::allocate_tiers(const MemoryInfo& mem) {
    placement::TierInputs in;
    in.gpu_free = mem.free_bytes > kRuntimeReserve ? mem.free_bytes - kRuntimeReserve : 0;
    in.gpu_cap = options.memory_cap_bytes;
    in.slab_cap = options.tiers.slab_cap;
    // What stays in the arena (dense weights, codebook, expert table, rotation flags), the
    // activations (the route ring among them), one sequence's state, and the tiers' own staging slot.
    in.resident_bytes = plan.total() + ExpertTiers::overhead_bytes(c, extent_stride);
    in.headroom = options.tiers.headroom;
    in.host_available = options.tiers.host_available ? options.tiers.host_available : host_mem_available();
    in.host_reserve = options.tiers.host_reserve;
    in.host_pool = options.tiers.host_pool;
    in.slot_bytes = extent_stride;
    in.experts = std::int64_t(c.num_layers) * c.n_routed_experts;
    std::vector<bool> hash(c.num_layers, false);
    for (int l = first_layer; l < end_layer; ++l) hash[l] = layers[l].hash;
    tiers = std::make_unique<ExpertTiers>();
    tiers->why = tier_reason;
    tiers->setup(c, options.tiers, in, hash);
    upload(stream);  // the arena, with the expert table pointing into the tiers
    tiers->fill([this](int l, int e, std::uint8_t* dst) { fill_extent(l, e, dst); }, stream);
    materialised.clear();
    materialised.shrink_to_fit();
    ensure_scratch(kScratchTokens);
}

// Reuse of a slot: the mover runs after a call's logits were copied back, which the stream
// orders after every kernel of the call, so nothing reads any slot while it runs; its copies
// are queued on that same stream, and set_address waits for them before it returns, so the
// next call's kernels (queued later on the stream) see the new bytes and the new table
// entries. A victim's slot is thus overwritten only after the kernels that read it finished
// (stream order standing in for an event), and never while the promoted expert's bytes are
// still on their way (the staging slot holds the victim meanwhile). Overlapping the copies
// with the next call's compute (a copy stream waiting on an event recorded after the last
// kernel that reads the victim, and the next call waiting on the copies' event) is not done.
void GpuModel::Impl::move_experts(int n) {
    if (!tiers || options.forward.no_routed_experts) return;
    ExpertTiers& t = *tiers;
    const auto t0 = std::chrono::steady_clock::now();
    const int k = c.experts_per_token, E = c.n_routed_experts;
    const std::size_t sb = t.slot_bytes;
    if (routes.tokens() != n) throw_internal("expert tiers: the route ring was not drained after the call");
    t.tokens += std::uint64_t(n);
    std::vector<placement::ExpertKey> keys;
    std::vector<std::uint32_t> counts;
    std::vector<int> index(E);  // where an expert is in keys, -1 if not chosen (prefill calls are long)
    for (int l = first_layer; l < run_end(); ++l) {
        keys.clear();
        counts.clear();
        std::fill(index.begin(), index.end(), -1);
        const std::int32_t* ids = routes.ids(l).data();  // drained by finish_call
        for (int j = 0; j < n * k; ++j) {
            if (ids[j] < 0 || ids[j] >= E)
                throw_internal("expert tiers: the router chose expert " + std::to_string(ids[j]) + " of layer " +
                               std::to_string(l));
            int& at = index[std::size_t(ids[j])];
            if (at < 0) {  // first seen: keys keep the order of first choice
                at = static_cast<int>(keys.size());
                keys.push_back(placement::ExpertKey(l) * E + placement::ExpertKey(ids[j]));
                counts.push_back(1);
            } else {
                ++counts[std::size_t(at)];
            }
        }
        placement::Dispatch d;
        d.index = t.dispatches++;
        d.step = t.steps;
        d.layer = static_cast<std::uint32_t>(l);
        d.hash = layers[l].hash;
        d.experts = keys;
        d.tokens = counts;
        t.policy->decided.clear();
        t.engine->dispatch(d);
        for (const placement::Admission& a : t.policy->decided) {
            const placement::ExpertKey A = a.admit;
            if (t.tier[A] != placement::Tier::host) throw_internal("expert tiers: admitted an expert not in the pool");
            const std::uint32_t p = t.slot[A];
            std::uint8_t* pool_host = static_cast<std::uint8_t*>(t.pool.data()) + std::size_t(p) * sb;
            const std::uint8_t* pool_dev = static_cast<const std::uint8_t*>(t.pool.device_data()) + std::size_t(p) * sb;
            std::uint32_t s = 0;
            if (a.evicts) {
                const placement::ExpertKey B = a.evict;
                if (t.tier[B] != placement::Tier::gpu || t.engine->tier(B) != placement::Tier::host)
                    throw_internal("expert tiers: a victim not in the slab, or not demoted to the pool");
                s = t.slot[B];
                std::uint8_t* slab_at = t.slab.as<std::uint8_t>() + std::size_t(s) * sb;
                stream.copy(t.staging.data(), slab_at, sb);  // the victim out of its slot
                stream.copy(slab_at, pool_host, sb);         // the promoted expert in
                stream.copy(pool_host, t.staging.data(), sb);  // the victim into the pool slot it left
                t.tier[B] = placement::Tier::host;
                t.slot[B] = p;
                set_address(c, *this, int(B / E), int(B % E), pool_dev, stream);
                t.moved_bytes += 2 * sb;
            } else {
                if (t.free_slab.empty()) throw_internal("expert tiers: an admission into a full slab");
                s = t.free_slab.back();
                t.free_slab.pop_back();
                stream.copy(t.slab.as<std::uint8_t>() + std::size_t(s) * sb, pool_host, sb);
                t.free_pool.push_back(p);
                t.moved_bytes += sb;
            }
            t.tier[A] = placement::Tier::gpu;
            t.slot[A] = s;
            set_address(c, *this, int(A / E), int(A % E), t.slab.as<std::uint8_t>() + std::size_t(s) * sb, stream);
            ++t.moves;
        }
    }
    ++t.steps;
    t.move_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

GpuTierReport GpuModel::tiers() const {
    const Impl& m = *shards_.front();
    GpuTierReport r;
    if (!m.tiers) {
        r.why = !m.experts_codebook ? "not codebook-stored (" +
                                          (m.experts_why_dense.empty() ? std::string("dense") : m.experts_why_dense) + ")"
                                    : "every expert in the weight arena";
        return r;
    }
    const ExpertTiers& t = *m.tiers;
    r.tiered = true;
    r.why = t.why;
    r.inputs = t.inputs;
    r.plan = t.plan;
    r.strategy = std::string(t.policy->name());
    r.counters = t.engine->counters();
    r.tokens = t.tokens;
    r.moves = t.moves;
    r.moved_bytes = t.moved_bytes;
    r.move_seconds = t.move_seconds;
    // Counted from the table the kernels read, not from the book.
    const auto* slab = t.slab.as<const std::uint8_t>();
    const auto* pool = static_cast<const std::uint8_t*>(t.pool.device_data());
    for (const std::uint8_t* a : m.table_host) {
        if (slab && a >= slab && a < slab + t.slab.size()) ++r.on_gpu;
        else if (pool && a >= pool && a < pool + t.pool.size()) ++r.in_pool;
    }
    return r;
}

std::string GpuTierReport::describe() const {
    if (!tiered) return "experts not tiered: " + why;
    return "experts tiered (" + why + "): " + plan.describe(inputs) + "; placement " + strategy;
}

std::string GpuTierReport::summary() const {
    if (!tiered) return {};
    const placement::Counters& k = counters;
    auto pct = [](std::uint64_t a, std::uint64_t b) { return b ? 100.0 * double(a) / double(b) : 0.0; };
    const double per_token = tokens ? 1.0 / double(tokens) : 0.0;
    char line[512];
    std::snprintf(line, sizeof line,
                  "experts (%s): %llu expert reads over %llu tokens, %.1f %% from the GPU slab, %.1f %% from the host pool; "
                  "PCIe %s a token (pool reads and moves); %.2f moves a token (%llu, %s copied, %.3f s)",
                  strategy.c_str(), (unsigned long long)k.accesses, (unsigned long long)tokens, pct(k.gpu_hits, k.accesses),
                  pct(k.host_hits, k.accesses), format_bytes(std::uint64_t(double(k.pcie_bytes) * per_token)).c_str(),
                  double(moves) * per_token, (unsigned long long)moves, format_bytes(moved_bytes).c_str(), move_seconds);
    return line;
}

}  // namespace aff::gpu
