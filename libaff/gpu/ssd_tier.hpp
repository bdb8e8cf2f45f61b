// One part of the expert tiers (expert_tiers.hpp): the SSD tier. Experts in neither the GPU slab
// nor the host pool stay in the container file; a layer that routes to one still runs, at the
// SSD's speed: the expert is read (O_DIRECT, a few reader threads: container/extent_reader.hpp)
// into a staging slot of pinned host memory mapped into the GPU's address space, its table entry
// is pointed at the slot, and the kernel the all-resident model runs reads it there over the bus
// (the same bytes in the same order: the logits stay bit-identical). The container's extent is
// the GPU's extent layout (w1, w2, w3 at multiples of 64 from its start: formats/container.md
// §7.5, checked per expert from the tensor directory), so the read lands ready for the kernel.
// Where the weights do not come from a container file the slot is filled from the mapped source
// instead (said in the start-up line).
//
// The dispatch. The route ids are computed on the device inside the call, so which SSD experts a
// layer needs is known on the host only after its router ran: with experts on the SSD, each layer
// that has any stops after its router (GpuModel::Impl::stage_ssd, called from moe()): the ids come
// back (one small copy and a stream synchronize), the SSD-resident ones are found, read into
// staging slots (placement/staging_slots.hpp picks the slots: ones still holding the expert are
// not read again), their entries pointed at the slots, and the layer's launches continue. A host
// sync inside a captured graph is impossible, so such a model decodes without captured graphs
// (options.graphs is turned off at load): the cost is the launch gaps a graph hides (the tiers
// test prints ms per step) plus one synchronize per SSD layer, both small next to one 12.75 MiB
// expert read at 1-2 GB/s. Hash-routed layers need no sync: their experts are known from the token
// ids (the layer's tid2eid), so their reads are submitted when the call starts (read_ahead_ssd,
// from start_part) and waited for at the layer. A prefill chunk reads each needed SSD expert once
// per layer and call, whatever its token count (a dispatch's SSD experts all fit: one layer's
// worth of staging slots).
//
// Which layers stop: those with an expert on the SSD now (placement::TierBook::ssd_in_layer,
// expert_tiers.hpp), counting the experts a moving policy dropped from the slab back to the SSD
// (the mover: forward_tiers.cpp); such an expert is read from its extent like any other, so
// every expert's extent is known, not only those on the SSD at load.
//
// Reuse of a slot: its bytes are overwritten (an evicting grant) only when no queued kernel may
// still read it: at a non-hash layer the ids' synchronize has just drained the stream; elsewhere
// (hash layers, the read-ahead, the mover) the stream is synchronized first whenever a grant
// evicts. An evicted expert's table entry is pointed at null (it is on the SSD only: a kernel that
// read it would fault rather than compute on stale bytes).
// Private to the GPU forward.
#pragma once

#include "libaff/container/extent_reader.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/placement/staging_slots.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace aff::gpu::fwd {

struct SsdTier {
    // Per key (layer · E + expert), with a reader: every expert's, not only those on the SSD at
    // load, since the mover drops slab experts back to the SSD (read from the file when routed to).
    std::vector<std::uint64_t> file_offset, file_size;
    std::size_t stride = 0;                        // one staging slot: 4096-aligned
    PinnedBuffer staging;                          // slots × stride, mapped
    // Declared after the staging: destroyed first, its threads finish every queued read into it.
    std::unique_ptr<ExtentReader> reader;          // null: filled from the mapped source
    std::unique_ptr<placement::StagingSlots> slots;
    std::vector<std::vector<std::uint64_t>> pieces;  // per slot: the reads in flight into it (tickets)
    std::string source;                            // where the reads come from (the start-up line)

    // This call: the tokens (hash layers' experts), and per layer the keys the read-ahead staged.
    std::vector<std::int32_t> tokens;
    std::vector<std::vector<placement::ExpertKey>> ahead;
    std::vector<bool> ahead_done;
    std::vector<std::int32_t> ids_host;            // a layer's route ids, copied back

    std::uint64_t reads = 0, bytes = 0, read_ahead = 0, syncs = 0, promoted = 0;  // syncs: after a router
    double wait_seconds = 0;                       // host time blocked on reads

    std::uint8_t* host_slot(std::uint32_t s) const { return static_cast<std::uint8_t*>(staging.data()) + std::size_t(s) * stride; }
    const std::uint8_t* device_slot(std::uint32_t s) const {
        return static_cast<const std::uint8_t*>(staging.device_data()) + std::size_t(s) * stride;
    }
};

}  // namespace aff::gpu::fwd
