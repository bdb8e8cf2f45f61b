// The expert tiers in GpuModel (expert_tiers.hpp): planning and filling them at load, the
// mover between calls, and the report (GpuModel::tiers).
#include "libaff/core/error.hpp"
#include "libaff/core/host_memory.hpp"
#include "libaff/core/units.hpp"
#include "libaff/gpu/forward_impl.hpp"
#include "kernels/expert_stage.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::allocate_tiers(const MemoryInfo& mem) {
    placement::TierInputs in;
    in.gpu_free = mem.free_bytes > kRuntimeReserve ? mem.free_bytes - kRuntimeReserve : 0;
    in.gpu_cap = options.memory_cap_bytes;
    in.slab_cap = options.tiers.slab_cap;
    // What stays in the arena (dense weights, codebook, expert table, rotation flags), the
    // activations (the route ring among them), one sequence's state, and the tiers' own device
    // staging slot (ExpertTiers::staging: a victim's bytes while its slot is refilled).
    in.resident_bytes = plan.total() + extent_stride;
    in.headroom = options.tiers.headroom;
    in.host_available = options.tiers.host_available ? options.tiers.host_available : host_mem_available();
    in.host_reserve = options.tiers.host_reserve;
    in.host_pool = options.tiers.host_pool;
    in.slot_bytes = extent_stride;
    in.experts = std::int64_t(c.num_layers) * c.n_routed_experts;
    in.staging_max = c.n_routed_experts;  // one layer's experts: a dispatch's SSD experts all at once
    std::vector<bool> hash(c.num_layers, false);
    for (int l = first_layer; l < end_layer; ++l) hash[l] = layers[l].hash;
    tiers = std::make_unique<ExpertTiers>();
    tiers->why = tier_reason;
    tiers->setup(c, options.tiers, in, hash);
    setup_ssd();
    tiers->stage_counters = Buffer(kExpertStageCounters * sizeof(std::uint32_t));
    stream.fill(tiers->stage_counters.data(), 0, tiers->stage_counters.size());
    tiers->prefetch_counters = Buffer(sizeof tiers->prefetch_read);
    stream.fill(tiers->prefetch_counters.data(), 0, tiers->prefetch_counters.size());
    upload(stream);  // the arena, with the expert table pointing into the tiers
    tiers->fill([this](int l, int e, std::uint8_t* dst) { fill_extent(l, e, dst); }, stream);
    materialised.clear();
    materialised.shrink_to_fit();
    ensure_scratch(kScratchTokens);
}

// How the mover's copies overlap and why no slot is reused early. The mover runs after a call
// (its logits copied back); it queues its copies on its own stream (ExpertTiers::copy_stream)
// and returns without waiting for them, so they run while the host samples, prepares and
// launches the next call. Three events order the two streams:
//   - call_done, recorded on the model's stream when the pass queues its first copy, is what
//     the copy stream waits on before it touches a slot: a victim's slot (and the promoted
//     expert's pool slot) is overwritten only after every kernel queued before it, those of
//     the call that read them included, finished. (The host has also waited for that call's
//     logits; the event makes the order the device's, not a consequence of that wait.)
//   - moves_done, recorded on the copy stream after the pass's byte copies and the upload of
//     the expert table, is what the next call waits on before its first launch
//     (wait_for_moves, from start_part): its kernels read the new bytes at the new entries.
//     Within the pass the copies are in stream order, so the one staging slot that holds a
//     victim while its slot is refilled is not reused before the victim reached the pool.
//   - call_start, recorded on the model's stream just before that wait: moves_done's time
//     less call_start's is how long the model's stream stood waiting for the copies (the
//     mover stall), read at the next pass, when both are complete.
// The table entries change between dispatches only: table_host (the host mirror) is edited
// by the pass, copied whole into a pinned buffer and uploaded by the copy stream after the
// bytes; no kernel runs while that happens (the next call waits for moves_done). The pinned
// buffer is rewritten only at a later pass, after a call that waited for the upload. The
// MTP layer's calls (forward_mtp.cpp) do not wait: they read neither a tiered expert nor the
// trunk's rows of the table, the only ones the copy stream writes.
void GpuModel::Impl::move_experts(int n) {
    if (!tiers || options.forward.no_routed_experts) return;
    ExpertTiers& t = *tiers;
    const auto t0 = std::chrono::steady_clock::now();
    const int k = c.experts_per_token, E = c.n_routed_experts;
    const std::size_t sb = t.slot_bytes;
    if (routes.tokens() != n) throw_internal("expert tiers: the route ring was not drained after the call");
    if (t.moves_queued) t.moves_done.synchronize();  // no call waited for the last pass (none ran): its upload buffer
    if (t.stall_open) {  // every event of the last pass and of the call that waited is complete
        t.copy_seconds += double(t.moves_done.ms_since(t.copies_start)) * 1e-3;
        const double ms = t.moves_done.ms_since(t.call_start);
        if (ms > 0) {
            t.stall_seconds += ms * 1e-3;
            ++t.stalled_calls;
        }
        t.stall_open = false;
    }
    t.tokens += std::uint64_t(n);
    bool queued = false;
    auto start_copies = [&] {
        if (queued) return;
        t.call_done.record(stream);
        t.copy_stream.wait(t.call_done);
        t.copies_start.record(t.copy_stream);
        queued = true;
    };
    auto point = [&](placement::ExpertKey key, const std::uint8_t* address) { table_host[std::size_t(key)] = address; };
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
            // Where the engine put the victim (the pool if it had room, else the SSD), and the
            // slots of the move (placement/tier_book.hpp).
            const placement::Tier victim_to = a.evicts ? t.engine->tier(a.evict) : placement::Tier::ssd;
            if (t.book->tier(a.admit) == placement::Tier::ssd) {
                start_copies();
                promote_from_ssd(a, victim_to);
                continue;
            }
            start_copies();
            const placement::TierBook::Move m = t.book->admit(a, victim_to);
            std::uint8_t* pool_host = static_cast<std::uint8_t*>(t.pool.data()) + std::size_t(m.from_slot) * sb;
            std::uint8_t* slab_at = t.slab.as<std::uint8_t>() + std::size_t(m.gpu_slot) * sb;
            const Stream& cs = t.copy_stream;
            if (m.evicts) {  // the victim goes into the pool slot the promoted expert leaves
                cs.copy(t.staging.data(), slab_at, sb);    // the victim out of its slot
                cs.copy(slab_at, pool_host, sb);           // the promoted expert in
                cs.copy(pool_host, t.staging.data(), sb);  // the victim into the pool slot it left
                point(m.evict, static_cast<const std::uint8_t*>(t.pool.device_data()) + std::size_t(m.evict_slot) * sb);
                t.moved_bytes += 2 * sb;
            } else {
                cs.copy(slab_at, pool_host, sb);
                t.moved_bytes += sb;
            }
            point(m.admit, slab_at);
            ++t.moves;
        }
    }
    if (queued) {  // the trunk's rows of the table after the bytes, then the event the next call waits on
        // (the MTP layer's row, after them, is never moved: its experts stay where they were put, arena or host)
        const std::size_t bytes = std::size_t(c.num_layers) * E * sizeof(const std::uint8_t*);
        if (bytes > t.table_upload.size()) throw_internal("expert tiers: the table outgrew its upload buffer");
        std::memcpy(t.table_upload.data(), table_host.data(), bytes);
        t.copy_stream.copy(at<const std::uint8_t*>(expert_table), t.table_upload.data(), bytes);
        t.moves_done.record(t.copy_stream);
        t.moves_queued = true;
    }
    ++t.steps;
    t.move_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// An SSD expert admitted into the slab (demand promotion of what a layer just read): its bytes
// come from its staging slot (read again if a later layer of the call took the slot) into a
// free slab slot or its victim's; the victim goes to the pool where the engine found it room,
// else back to the SSD (its entry null; read from the container when routed to again, like
// any SSD expert: ssd_tier.cpp knows every expert's extent, and its layer now stages after
// its router). The copies go on the copy stream like the pool's (after call_done: the
// caller's start_copies), in order: victim out, then the promoted expert in; the table
// entries change in table_host, uploaded with the pass. The host then waits for the copy
// stream before it releases the staging slot, since the next call's reads overwrite staging
// slots from the host, which no event orders.
void GpuModel::Impl::promote_from_ssd(const placement::Admission& a, placement::Tier victim_to) {
    ExpertTiers& t = *tiers;
    const std::size_t sb = t.slot_bytes;
    const std::uint8_t* bytes = staged_bytes(a.admit);  // before the book moves it off the SSD
    const placement::TierBook::Move m = t.book->admit(a, victim_to);
    const Stream& cs = t.copy_stream;
    std::uint8_t* slab_at = t.slab.as<std::uint8_t>() + std::size_t(m.gpu_slot) * sb;
    if (m.evicts) {
        if (m.evict_to == placement::Tier::host) {
            cs.copy(static_cast<std::uint8_t*>(t.pool.data()) + std::size_t(m.evict_slot) * sb, slab_at, sb);
            table_host[m.evict] = static_cast<const std::uint8_t*>(t.pool.device_data()) + std::size_t(m.evict_slot) * sb;
            t.moved_bytes += sb;
        } else {
            table_host[m.evict] = nullptr;
        }
    }
    cs.copy(slab_at, bytes, sb);
    table_host[m.admit] = slab_at;
    cs.synchronize();  // the staging slot's bytes are in the slab: it may be reused
    t.ssd->slots->release(m.admit);
    t.moved_bytes += sb;
    ++t.moves;
    ++t.ssd->promoted;
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
    r.copy_seconds = t.copy_seconds;
    r.stall_seconds = t.stall_seconds;
    r.stalled_calls = t.stalled_calls;
    r.waited_calls = t.waited_calls;
    if (t.stall_open) {  // the last call's wait, not yet read by a pass (its events are complete once it returned)
        r.copy_seconds += double(t.moves_done.ms_since(t.copies_start)) * 1e-3;
        const double ms = t.moves_done.ms_since(t.call_start);
        if (ms > 0) {
            r.stall_seconds += ms * 1e-3;
            ++r.stalled_calls;
        }
    }
    // Counted from the table the kernels read, not from the book.
    const auto* slab = t.slab.as<const std::uint8_t>();
    const auto* pool = static_cast<const std::uint8_t*>(t.pool.device_data());
    // The trunk's rows only: the MTP layer's (in the arena or in its own host buffer) is no tier's.
    const std::size_t trunk = std::min(m.table_host.size(), std::size_t(m.c.num_layers) * m.c.n_routed_experts);
    for (const std::uint8_t* a : std::span(m.table_host).first(trunk)) {
        if (slab && a >= slab && a < slab + t.slab.size()) ++r.on_gpu;
        else if (pool && a >= pool && a < pool + t.pool.size()) ++r.in_pool;
        else if (t.ssd) ++r.on_ssd;  // a staging slot or null
    }
    static_assert(sizeof t.stage_read / sizeof t.stage_read[0] == kExpertStageCounters);
    if (t.stage_dirty || t.prefetch_armed) {  // one wait for both copies
        ExpertTiers& w = *m.tiers;  // the host copies of the device counters (a cache: the model is unchanged)
        if (t.stage_dirty) m.stream.copy(w.stage_read, t.stage_counters.data(), sizeof w.stage_read);
        if (t.prefetch_armed) m.stream.copy(w.prefetch_read, t.prefetch_counters.data(), sizeof w.prefetch_read);
        m.stream.synchronize();
        w.stage_dirty = false;
    }
    r.prefetched_experts = t.prefetch_read[kStagedExperts];
    r.prefetch_left = t.prefetch_read[kInPlaceExperts];
    r.prefetch_hits = t.prefetch_read[ExpertTiers::kPrefetchHits];
    r.staged_experts = t.stage_read[kStagedExperts];
    r.staged_tiles = t.stage_read[kStagedTiles];
    r.in_place_experts = t.stage_read[kInPlaceExperts];
    r.in_place_tiles = t.stage_read[kInPlaceTiles];
    if (t.ssd) {
        const SsdTier& s = *t.ssd;
        r.ssd_source = s.source;
        r.ssd_reads = s.reads;
        r.ssd_bytes = s.bytes;
        r.ssd_read_ahead = s.read_ahead;
        r.ssd_syncs = s.syncs;
        r.ssd_promoted = s.promoted;
        r.ssd_wait_seconds = s.wait_seconds;
    }
    return r;
}

std::string GpuTierReport::describe() const {
    if (!tiered) return "experts not tiered: " + why;
    std::string line = "experts tiered (" + why + "): " + plan.describe(inputs) + "; placement " + strategy;
    if (plan.ssd_experts > 0)
        line += "; SSD experts by " + ssd_source + ", decode graphs off (a layer with SSD experts waits for its router)";
    return line;
}

std::string GpuTierReport::summary() const {
    if (!tiered) return {};
    const placement::Counters& k = counters;
    auto pct = [](std::uint64_t a, std::uint64_t b) { return b ? 100.0 * double(a) / double(b) : 0.0; };
    const double per_token = tokens ? 1.0 / double(tokens) : 0.0;
    char line[768];
    std::snprintf(line, sizeof line,
                  "experts (%s): %llu expert reads over %llu tokens, %.1f %% from the GPU slab, %.1f %% from the host pool, "
                  "%.1f %% from the SSD (%llu reads); "
                  "PCIe %s a token (pool reads and moves); %.2f moves a token (%llu, %s copied on the copy stream in "
                  "%.3f s); mover stalls %.3f ms a token (%llu of %llu calls waited on copies)",
                  strategy.c_str(), (unsigned long long)k.accesses, (unsigned long long)tokens, pct(k.gpu_hits, k.accesses),
                  pct(k.host_hits, k.accesses), pct(k.ssd_reads, k.accesses), (unsigned long long)k.ssd_reads,
                  format_bytes(std::uint64_t(double(k.pcie_bytes) * per_token)).c_str(),
                  double(moves) * per_token, (unsigned long long)moves, format_bytes(moved_bytes).c_str(), copy_seconds,
                  stall_seconds * 1e3 * per_token, (unsigned long long)stalled_calls, (unsigned long long)waited_calls);
    std::string s = line;
    if (staged_experts + in_place_experts > 0) {
        std::snprintf(line, sizeof line,
                      "; prefill GEMMs: %llu bus-read experts staged into HBM once (%llu tiles of 64 jobs), %llu read in "
                      "place (%llu tiles)",
                      (unsigned long long)staged_experts, (unsigned long long)staged_tiles,
                      (unsigned long long)in_place_experts, (unsigned long long)in_place_tiles);
        s += line;
    }
    if (prefetched_experts > 0) {
        std::snprintf(line, sizeof line,
                      "; decode prefetch: %.2f pooled experts a token copied into HBM during attention, %.1f %% of them "
                      "routed to, %.2f predicted ones a token left on the bus; %.1f %% of expert reads from HBM (the slab "
                      "or prefetched)",
                      double(prefetched_experts) * per_token, pct(prefetch_hits, prefetched_experts),
                      double(prefetch_left) * per_token, pct(k.gpu_hits + prefetch_hits, k.accesses));
        s += line;
    }
    if (plan.ssd_experts > 0) {
        std::snprintf(line, sizeof line,
                      "; SSD: %llu expert reads (%s, %llu read ahead, %.1f MB/s over the %.3f s waited), %llu router "
                      "syncs, %llu promoted",
                      (unsigned long long)ssd_reads, format_bytes(ssd_bytes).c_str(), (unsigned long long)ssd_read_ahead,
                      ssd_wait_seconds > 0 ? double(ssd_bytes) / ssd_wait_seconds / 1e6 : 0.0, ssd_wait_seconds,
                      (unsigned long long)ssd_syncs, (unsigned long long)ssd_promoted);
        s += line;
    }
    return s;
}

}  // namespace aff::gpu
