// The SSD tier in GpuModel (ssd_tier.hpp): set up at load, the per-layer staging after the
// router, the hash layers' read-ahead, and the mover's access to a staged expert.
#include "libaff/gpu/ssd_tier.hpp"

#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"
#include "libaff/model/container_tensors.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>

namespace aff::gpu {

using namespace fwd;

namespace {

constexpr std::uint64_t kPiece = 2u << 20;  // an extent's reads: 2 MiB pieces, several threads on one expert
constexpr int kReaderThreads = 8;           // requests in flight: an NVMe drive needs several

bool ends_with(std::string_view s, std::string_view tail) {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

// Why the container's extents cannot be read straight into a staging slot (empty: they can):
// every expert's w1, w2, w3 must lie where the GPU's layout puts them in its extent. Every
// expert, not only those on the SSD at load: the mover drops slab experts to the SSD.
static std::string container_mismatch(const Container& file, const ExpertTiers& t, const ExtentLayout& layout,
                                      std::size_t w13, std::size_t w2, SsdTier& s) {
    const std::size_t keys = t.book->tiers().size();
    s.file_offset.assign(keys, 0);
    s.file_size.assign(keys, 0);
    for (std::size_t k = 0; k < keys; ++k) {
        const std::uint32_t l = std::uint32_t(k / t.experts), e = std::uint32_t(k % t.experts);
        const ExpertExtent* x = file.find_expert(ExpertKey{false, l, e});
        const std::string name = "expert " + std::to_string(e) + " of layer " + std::to_string(l);
        if (!x) return name + " has no extent in " + file.path();
        int matched = 0;
        for (const std::uint32_t i : x->tensors) {
            const TensorInfo& ti = file.tensors()[i];
            for (const auto& [tail, at, bytes] : {std::tuple{".w1.weight", layout.w1, w13}, std::tuple{".w2.weight", layout.w2, w2},
                                                  std::tuple{".w3.weight", layout.w3, w13}})
                if (ends_with(ti.name, tail)) {
                    if (ti.offset_in_extent != at || ti.length != bytes)
                        return name + "'s " + ti.name + " lies at " + std::to_string(ti.offset_in_extent) + " (" +
                               std::to_string(ti.length) + " bytes) in its extent, the GPU's layout at " + std::to_string(at) +
                               " (" + std::to_string(bytes) + ")";
                    ++matched;
                }
        }
        if (matched != 3) return name + "'s extent does not hold w1, w2 and w3";
        s.file_offset[k] = x->offset;
        s.file_size[k] = x->size;
        s.stride = std::max<std::size_t>(s.stride, ExtentReader::staging_bytes(x->size));
    }
    return {};
}

void GpuModel::Impl::setup_ssd() {
    ExpertTiers& t = *tiers;
    if (t.plan.ssd_experts == 0) return;
    auto s = std::make_unique<SsdTier>();
    s->stride = t.plan.staging_slot_bytes(t.inputs);
    std::string why_mapped;
    const auto* file = dynamic_cast<const ContainerTensorReader*>(weights_src);
    if (!file) {
        why_mapped = "the weights are not a container file's";
    } else {
        why_mapped = container_mismatch(file->container(), t, extent, w13_bytes, w2_bytes, *s);
        // The model's bytes must be the file's (a model loaded from another file than the reader's).
        for (std::size_t k = 0; why_mapped.empty() && k < t.book->tiers().size(); ++k) {
            if (t.book->tier(placement::ExpertKey(k)) != placement::Tier::ssd) continue;
            const int l = int(k / std::size_t(t.experts)), e = int(k % std::size_t(t.experts));
            std::vector<std::uint8_t> mine(extent.bytes, 0);
            fill_extent(l, e, mine.data());
            const std::uint8_t* theirs = file->container().bytes(*file->container().find_expert(ExpertKey{false, std::uint32_t(l), std::uint32_t(e)})).data();
            for (const std::size_t at : {extent.w1, extent.w2, extent.w3}) {
                const std::size_t n = at == extent.w2 ? w2_bytes : w13_bytes;
                if (std::memcmp(mine.data() + at, theirs + at, n) != 0)
                    why_mapped = "the container's bytes of expert " + std::to_string(e) + " of layer " + std::to_string(l) +
                                 " are not the model's";
            }
            break;  // one expert: a spot check, not a read of the whole tier
        }
    }
    s->stride = (s->stride + ExtentReader::kAlign - 1) / ExtentReader::kAlign * ExtentReader::kAlign;
    if (why_mapped.empty()) {
        s->reader = std::make_unique<ExtentReader>(file->container().path(), kReaderThreads, true);
        s->source = (s->reader->direct() ? "O_DIRECT reads of " : "buffered reads (the filesystem refuses O_DIRECT) of ") +
                    file->container().path();
    } else {
        s->source = "copies from the mapped source (" + why_mapped + ")";
    }
    const std::uint32_t n = static_cast<std::uint32_t>(t.plan.staging_slots);
    if (n == 0) throw_internal("expert tiers: experts on the SSD and no staging slot planned");
    s->staging = PinnedBuffer(std::size_t(n) * s->stride);
    s->slots = std::make_unique<placement::StagingSlots>(n);
    s->pieces.assign(n, {});
    s->ahead.assign(std::size_t(t.layers), {});
    s->ahead_done.assign(std::size_t(t.layers), false);
    t.ssd = std::move(s);
    // A layer with SSD experts synchronizes after its router (ssd_tier.hpp): nothing to capture.
    options.graphs = false;
}

void GpuModel::Impl::wait_slot(std::uint32_t slot) {
    SsdTier& s = *tiers->ssd;
    if (s.pieces[slot].empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr error;
    for (const std::uint64_t ticket : s.pieces[slot]) {  // every piece waited for, the first error kept
        try {
            s.reader->wait(ticket);
        } catch (...) {
            if (!error) error = std::current_exception();
        }
    }
    s.pieces[slot].clear();
    s.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (error) std::rethrow_exception(error);
}

void GpuModel::Impl::read_into_slot(placement::ExpertKey key, std::uint32_t slot) {
    SsdTier& s = *tiers->ssd;
    const int E = c.n_routed_experts;
    std::uint8_t* dst = s.host_slot(slot);
    ++s.reads;
    if (!s.reader) {  // the mapped source: a copy, done when it returns
        const auto t0 = std::chrono::steady_clock::now();
        fill_extent(int(key / E), int(key % E), dst);
        s.bytes += extent.bytes;
        s.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return;
    }
    const std::uint64_t offset = s.file_offset[key], size = s.file_size[key];
    s.bytes += size;
    for (std::uint64_t at = 0; at < size; at += kPiece)
        s.pieces[slot].push_back(s.reader->submit(offset + at, std::min(kPiece, size - at), dst + at));
}

void GpuModel::Impl::point_entries(std::span<const std::pair<placement::ExpertKey, const std::uint8_t*>> entries) {
    if (entries.empty()) return;
    const std::uint8_t** table = at<const std::uint8_t*>(expert_table);
    for (const auto& [key, address] : entries) {
        table_host[key] = address;
        stream.copy(table + key, &table_host[key], sizeof(const std::uint8_t*));
    }
    stream.synchronize();  // before the layer's launches are queued; the host entries are the copies' sources
}

void GpuModel::Impl::stage_keys(std::span<const placement::ExpertKey> keys, bool drained) {
    if (keys.empty()) return;
    SsdTier& s = *tiers->ssd;
    const std::vector<placement::StagingSlots::Grant> grants = s.slots->acquire(keys);
    const bool evicts = std::any_of(grants.begin(), grants.end(), [](const auto& g) { return g.evicts; });
    if (evicts && !drained) stream.synchronize();  // a queued kernel may still read an evicted slot
    std::vector<std::pair<placement::ExpertKey, const std::uint8_t*>> entries;
    for (const placement::StagingSlots::Grant& g : grants) {
        if (g.evicts) {
            wait_slot(g.slot);  // a read-ahead of the evicted expert still landing there
            entries.emplace_back(g.evicted, nullptr);
        }
        if (g.read) read_into_slot(g.key, g.slot);
    }
    for (const placement::StagingSlots::Grant& g : grants) {
        wait_slot(g.slot);
        if (table_host[g.key] != s.device_slot(g.slot)) entries.emplace_back(g.key, s.device_slot(g.slot));
    }
    point_entries(entries);
}

std::vector<placement::ExpertKey> GpuModel::Impl::ssd_keys(int l, std::span<const std::int32_t> ids) const {
    const ExpertTiers& t = *tiers;
    const int E = c.n_routed_experts;
    std::vector<placement::ExpertKey> keys;
    for (const std::int32_t id : ids) {
        if (id < 0 || id >= E)
            throw_internal("expert tiers: the router chose expert " + std::to_string(id) + " of layer " + std::to_string(l));
        const placement::ExpertKey key = placement::ExpertKey(l) * E + placement::ExpertKey(id);
        if (t.book->tier(key) == placement::Tier::ssd && std::find(keys.begin(), keys.end(), key) == keys.end())
            keys.push_back(key);
    }
    return keys;
}

std::vector<placement::ExpertKey> GpuModel::Impl::hash_ssd_keys(int l) const {
    const std::vector<std::int32_t>& tid2eid = cpu.weights().layers[l].ffn.tid2eid;  // [V][k]
    const std::size_t k = std::size_t(c.experts_per_token);
    std::vector<std::int32_t> ids;
    for (const std::int32_t tok : tiers->ssd->tokens)
        ids.insert(ids.end(), tid2eid.begin() + std::ptrdiff_t(std::size_t(tok) * k),
                   tid2eid.begin() + std::ptrdiff_t(std::size_t(tok) * k + k));
    return ssd_keys(l, ids);
}

void GpuModel::Impl::read_ahead_ssd(std::span<const std::int32_t> toks) {
    if (!tiers || !tiers->ssd || options.forward.no_routed_experts) return;
    SsdTier& s = *tiers->ssd;
    s.tokens.assign(toks.begin(), toks.end());
    std::fill(s.ahead_done.begin(), s.ahead_done.end(), false);
    // The hash layers in order, as many as the staging slots hold at once (the rest, a long chunk's
    // say, read their own at the layer).
    std::vector<placement::ExpertKey> all;
    bool full = false;
    for (int l = first_layer; l < run_end(); ++l) {
        s.ahead[l].clear();
        if (full || !layers[l].hash || tiers->book->ssd_in_layer(std::uint32_t(l)) == 0) continue;
        std::vector<placement::ExpertKey> keys = hash_ssd_keys(l);
        if (all.size() + keys.size() > s.slots->slots()) {
            full = true;
            continue;
        }
        all.insert(all.end(), keys.begin(), keys.end());
        s.ahead[l] = std::move(keys);
        s.ahead_done[l] = true;  // its experts are known: no router sync at the layer
    }
    if (all.empty()) return;
    const std::vector<placement::StagingSlots::Grant> grants = s.slots->acquire(all);
    if (std::any_of(grants.begin(), grants.end(), [](const auto& g) { return g.evicts; })) {
        stream.synchronize();  // the previous call's kernels are done; this orders the token copies too
    }
    std::vector<std::pair<placement::ExpertKey, const std::uint8_t*>> entries;
    for (const placement::StagingSlots::Grant& g : grants) {
        if (g.evicts) {
            wait_slot(g.slot);
            entries.emplace_back(g.evicted, nullptr);
        }
        if (g.read) {
            read_into_slot(g.key, g.slot);  // not waited for: the layer waits (stage_ssd)
            ++s.read_ahead;
        }
    }
    point_entries(entries);
}

void GpuModel::Impl::stage_ssd(int l, int n) {
    if (!tiers || !tiers->ssd) return;
    SsdTier& s = *tiers->ssd;
    // The MTP layer (layers[num_layers], forward_mtp.cpp) keeps its experts in the arena. A layer
    // with no expert on the SSD now (the book's count follows the mover's promotions and drops)
    // needs no staging.
    if (l < 0 || l >= tiers->layers || tiers->book->ssd_in_layer(std::uint32_t(l)) == 0) return;
    if (s.ahead_done[l]) {  // this call's read-ahead (start_part): once, the layer runs once a call
        s.ahead_done[l] = false;
        return stage_keys(s.ahead[l], false);
    }
    // Else (a learned layer, or a hash layer whose read-ahead did not fit) the device's ids.
    const std::size_t ids = std::size_t(n) * c.experts_per_token;
    s.ids_host.resize(ids);
    stream.copy(s.ids_host.data(), route_ids, ids * 4);
    stream.synchronize();  // the router's ids; every earlier kernel is done too
    ++s.syncs;
    stage_keys(ssd_keys(l, s.ids_host), true);
}

const std::uint8_t* GpuModel::Impl::staged_bytes(placement::ExpertKey key) {
    SsdTier& s = *tiers->ssd;
    const placement::ExpertKey one[1] = {key};
    stage_keys(one, false);
    return s.host_slot(*s.slots->slot_of(key));
}

}  // namespace aff::gpu
