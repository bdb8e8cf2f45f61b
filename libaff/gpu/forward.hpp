// The GPU forward pass of DeepSeek-V4 (model doc §3): a GpuModel holds every weight in one
// device arena (sized against free VRAM and the --gpu-mib cap before anything is allocated)
// and runs the same computation as the CPU reference (libaff/model/forward.cpp), which it is
// tested against end to end (tests/gpu/forward_test.cpp) on every tiny fixture, and on
// quantised containers (tests/gpu/container_forward_test.cpp).
//
// What runs where:
//   GPU: embedding, mHC pre/expand with Sinkhorn and the hyper head, every RMSNorm, the
//        attention block (q/kv projections, RoPE, CSA/HCA compressors, indexer top-k, sink
//        attention over the ring and the compressed entries, de-rotation, grouped output
//        projection; kernels/attention, compressor, indexer) with its decode state on the
//        device, the router (sqrtsoftplus, bias or hash), routed experts (dense BF16/F32
//        stacks, ids read on the device; or codebook-stored, below), shared expert, clamped
//        SwiGLU, final norm and head. Dense projections use fp8_gemv on the model file's own
//        FP8 bytes and E8M0 scales (a checkpoint's or a container's, through TensorReader::
//        fp8_stored) when the shape allows it (k % 128 == 0, n % 8 == 0), else bf16_gemv on
//        exact BF16 values (the head too; dense_gemv for F32 values or shapes bf16_gemv
//        refuses). Calls of 1–4 tokens run each mHC site as two launches (kernels/hc.hpp
//        hc_site: the previous sub-block's expand, the pre step with Sinkhorn and the norm;
//        hc_head_site: the last expand, the hyper head and the final norm). A decode step
//        makes no host round trip until the logits.
//   Decode (one token for each of 1..4 sequences, GpuModel::decode; forward with one token
//        too): the step's launches are captured once per set of sequences into a CUDA/HIP
//        graph (libaff/gpu/device.hpp, Graph) and replayed; what changes between steps (token
//        ids, positions, hence ring slots and visible entries, the routed experts, which
//        moe_gemv_routed reads from the router's output on the device) is read by the kernels
//        from device memory. GpuOptions::graphs = false issues the same launches one by one
//        (same logits bit for bit: tests/gpu/decode_test.cpp). Projections, norms, mHC and
//        experts take the sequences as one batch; compressors, indexer and attention run per
//        sequence on its own state.
//   CPU: the attention block of models whose geometry the attention kernels do not take
//        (head_dim other than 32/64/128/256/512, indexer limits), through
//        Model::attention_block with the CPU's own decode state; the block's input goes to
//        the host and its output comes back once per layer. describe() says which.
//   Logits come back to the host; sampling stays on the CPU (libaff/runtime/sampler).
//   Prefill runs the whole prompt (or each chunk) as one batch. Prefill calls of
//   gemm_min_tokens (5) or more run FP8 and BF16 projections through fp8_gemm / bf16_gemm and
//   TQ2875 routed experts through moe_gemm (tokens grouped by expert on the device), and the
//   CSA indexer's scores (IndexerMath::bf16_mma), on the tensor cores with bf16 inputs; shapes those refuse, layers with TQ2875R experts (no
//   rotated input in moe_gemm yet), decode steps, calls of 1–4 tokens and exact mode
//   (GpuOptions::exact) take the GEMVs (fp32 activations).
// Weight storage: BF16 where every value of a tensor is exactly a BF16 number (all BF16
// checkpoint tensors, FP4 experts, FP8 values), F32 otherwise: both are lossless, so the GPU
// multiplies the very values the CPU reference does and the comparison stays tight.
// Routed experts of a source that offers its codebook-stored bytes (CodebookExperts: a
// quantised container's ContainerExpertSource) stay at 2.875 bits a weight on the device and
// go through moe_gemv_routed (it reads the router's ids on the device; w1 and w3 in one
// launch; each distinct expert decoded once for all the tokens of a launch that chose it)
// when moe_gemv takes the shape (k % 1024 == 0, k <= 4096: V4-Flash's 4096/2048). TQ2875R
// matrices, stored as W Hᵀ, get H x: kernels/hadamard rotates the layer's input once per
// token for w1/w3 and each pair's SwiGLU row for w2 (in layers with a rotated expert; w1 and
// w3 then run as two launches), and the kernel reads the rotated copy for a flagged expert.
// Each such expert is one extent (w1, w2, w3 as the container lays them out) that the kernels
// find through the expert table [layer][expert] → address when they run, so an extent can
// move, to other device memory or to mapped pinned host memory, between two replays of a
// captured decode step (move_expert).
// Any other ExpertSource (small shapes, unquantised container experts) is read through its
// matvec at load into the dense stacks, for small models only.
// Several GPUs (GpuOptions::devices, --gpus N): the layers are split into contiguous ranges,
// one per device (a layer split; libaff/placement/layer_split.hpp plans it from each device's
// free memory). Each device holds only its layers' weights (the first also the embedding, the
// last the hyper head, final norm and head), its own activations, stream, captured graphs and
// its part of every sequence's state; between devices the residual stream (the mHC streams
// [n, hc_mult, D], plus the pending expand's f, post and comb in decode-sized calls) is
// copied peer to peer (through the host where the devices cannot). The devices run one after
// another: the split buys memory, not speed. Logits are the one-device model's bit for bit
// (tests/gpu/multi_gpu_test.cpp).
// MTP (model doc §5.1, forward_mtp.cpp): the `mtp.0` layer, when the model has it, is uploaded
// beside the trunk (its projections, norms, hyper head and sliding-window layer as the trunk's
// layers are, its routed experts as layer num_layers of the expert table, resident in the
// arena by default when the trunk's experts are all resident, in pinned host memory by default
// when they are tiered: DraftPlacement) and run by mtp_forward on the trunk's final
// streams, which stay on the device: keep_streams copies rows of the last call's streams into
// the MTP state's store. One GPU with attention on it only (mtp_why_not says why not).
// DSpark (model doc §5.2, forward_taps.cpp, forward_dspark.cpp): set_taps makes the trunk's
// calls also give the tap features (the mean of the streams after each tap layer) on the
// host, for the DSpark drafter; its stages, when the model has them, are uploaded beside the
// trunk as the MTP layer is (layers num_layers + s, their routed experts as those layers of
// the expert table, placed by DraftPlacement) and run by dspark_extend and dspark_block on
// a GpuDsparkState (libaff/runtime/gpu_dspark_runner.hpp). One GPU with attention on it
// only (dspark_why_not says why not; the runner then runs the stages on the CPU).
// Not yet: batched prefill of several sequences.
// Plain C++ header; built in GPU builds only (libaff/runtime/open_sequence.hpp is the always-built door).
#pragma once

#include "libaff/gpu/device.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/placement/engine.hpp"
#include "libaff/placement/policy.hpp"
#include "libaff/placement/tier_plan.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace aff {
class TensorReader;
}

namespace aff::gpu {

inline constexpr int kDecodeBatchMax = 4;  // sequences one decode call takes (the GEMVs' batch)

// Expert tiers (libaff/gpu/expert_tiers.hpp): codebook-stored routed experts that do not all
// fit the GPU live in a GPU slab of equal, layer-agnostic slots and one pinned, mapped host
// pool the kernels read over the bus; the same kernels read the same bytes, so the logits are
// those of the all-resident model bit for bit. Used when the model does not fit the GPU (its
// free memory less the runtime's reserve, and --gpu-mib), or when slab_cap is set; otherwise
// every expert stays in the weight arena as before. One GPU only (several: refused when they
// would be needed).
struct GpuTierOptions {
    std::optional<std::size_t> slab_cap;        // --gpu-expert-mib in bytes: tiers, the slab at most this
    std::optional<std::size_t> headroom;        // --gpu-headroom-mib; unset: placement::derived_headroom
    std::optional<std::size_t> host_pool;       // --host-pool-mib; unset: MemAvailable less host_reserve
    std::size_t host_reserve = placement::kDefaultHostReserve;  // --host-pool-reserve-mib
    std::size_t host_available = 0;             // MemAvailable; 0: read from /proc/meminfo (tests set it)
    // The mover between calls (placement/policy.hpp names; "static" moves nothing).
    std::string strategy = "heat";
    placement::HeatOptions heat = placement::gpu_mover_heat_options();
    // Initial placement: per-(layer, expert) counts, layer-major (an expert profile); busiest
    // first into the slab. Empty: layer-major key order.
    std::vector<std::uint64_t> profile;
    // --expert-prefetch: in decode-sized calls, pooled experts a layer copied into HBM while its
    // attention runs, chosen from the layer's routing predicted before attention (its router on
    // the streams entering it, as if attention added nothing; the hash layers' exactly). The
    // bus idles during attention at batch 1; an expert predicted right is then read from HBM.
    // Same bytes, same kernels: the logits do not change. 0: off. Not with experts on the SSD.
    int prefetch_experts = 1;
    // Blocks a prefetched expert's copy runs on (ExpertStageArgs::copy_blocks), each with
    // 16 KiB of mapped reads in flight. A full grid (0) queues megabytes on the bus and the
    // attention kernels beside it slow by as much as the copy saves; 4 or 8 blocks cannot keep
    // the bus busy (the MoE waits for the copy); 16 (256 KiB in flight) was the fastest at
    // V4 geometry, 24 and 32 no faster (tests/bench/RESULTS.md, session 16).
    int prefetch_copy_blocks = 16;
    // Loads in flight per copy thread (ExpertStageArgs::copy_depth: 4 or 8). 8 on 8 or 12
    // blocks moved as much beside a little less interference (copy_interference_bench: 1.09 x
    // against 1.14 x), but the tiered step did not change (24 GiB batch 1: 4.26 against 4.29 ms;
    // tests/bench/RESULTS.md, session 17). Internal: tiers_bench's ":pfNbBdD".
    int prefetch_copy_depth = 4;
    // The copy by Hopper's bulk-copy unit (ExpertStageArgs::copy_bulk): one thread a block and
    // the TMA, prefetch_copy_depth chunks of prefetch_copy_chunk_kib in flight a block; the
    // threads' copy where the build has no sm_90 code. A third of the threads' copy's
    // interference with the decode beside it at the same ~42 GB/s, but the tiered step did not
    // change (24 GiB batch 1: 4.25-4.26 ms either way; at 2 experts a layer 1 % slower than the
    // default; tests/bench/RESULTS.md, session 19). Internal: tiers_bench's ":pfNbBdDtK".
    bool prefetch_copy_bulk = false;
    int prefetch_copy_chunk_kib = 16;
};

// Where the draft layers' (the MTP layer's, or DSpark's stages') codebook-stored routed
// experts live (--draft-placement).
// In VRAM they take the arena (V4-Flash: 256 x 8.6 MiB = 2.2 GiB); in RAM they lie in pinned,
// mapped host memory and the expert table's MTP row points there, so the same moe_gemv
// kernels read the same bytes over the bus: the logits are those of vram bit for bit, and
// only the draft steps pay the bus. automatic: vram when the trunk's experts are all in the
// arena, ram when they are tiered, since there every slab slot the draft's experts would take
// holds a trunk expert that every token reads, where the draft's are read only by draft steps.
// ram with dense (non-codebook) experts is refused (unsupported): a dense stack has no extents
// for the table to point at.
enum class DraftPlacement { automatic, vram, ram };

// Prefill GEMM calls on a tiered model (kernels/expert_stage.hpp): moe_gemm reads an expert's
// matrices once per 64 of its jobs, so a pooled (or SSD-staged) expert that a long chunk routes
// many tokens to would cross the bus several times. Before a layer's routed GEMMs such experts
// are copied once into device scratch slots and the GEMMs read them there; same bytes, same
// kernel: the logits do not change. automatic: in calls of kStageEveryFrom tokens or more
// every bus-read expert routed to, in shorter ones the experts with more than one tile's jobs
// (> 64: read twice or more in place); on: every bus-read expert routed to in any call (a
// one-tile expert's copy gains nothing in a short call: for measurement); off: every expert read in place
// (the step still counts what it would stage, nothing copied). Busiest first while slots last
// (GpuOptions::prefill_stage_slots; the rest are read in place). Decode steps and calls of the
// GEMVs never stage.
enum class PrefillStaging { automatic, on, off };
inline constexpr int kStageEveryFrom = 256;

struct GpuOptions {
    int device = 0;                    // ordinal among the visible devices
    // Several GPUs: the layers split across these ordinals in this order (each capped at
    // memory_cap_bytes); empty or one entry: `device` (or that entry) alone. An ordinal may
    // repeat (two parts on one GPU, sharing its free memory: tests of the split on one GPU).
    std::vector<int> devices;
    std::vector<int> layers_per_device;  // with devices: layers on each, as given (tests); empty: planned
    std::size_t memory_cap_bytes = 0;  // --gpu-mib; 0 = all free memory
    int max_context = 0;               // tokens a sequence's GPU state holds; 0 = max_position_embeddings
    bool cpu_attention = false;        // run attention on the CPU even where the kernels take it (tests)
    bool graphs = true;                // decode replays captured graphs (false: the same launches one by one)
    int gemm_min_tokens = 5;           // calls of this many tokens or more use the prefill GEMMs; 0 = never
    // Exact mode: every product takes fp32 activations (the GEMVs and the indexer's fp32 scores,
    // whatever gemm_min_tokens says), so the logits match the CPU reference's within fp32
    // summation order (tests/gpu/sweep_test.cpp holds it to 1e-4 of DeepSeek's reference). The
    // default mode's prefill GEMMs round activations to bf16; its bound against exact mode is
    // stated and tested there too.
    bool exact = false;
    ForwardOptions forward;            // max_layers, no_routed_experts (diagnostics)
    GpuTierOptions tiers;
    DraftPlacement draft_placement = DraftPlacement::automatic;
    PrefillStaging prefill_staging = PrefillStaging::automatic;
    // Scratch slots (an expert extent each) at most, in the activations of a tiered model; a
    // call of n tokens gets min(this, n·k / 64, experts): V4-Flash, 8.6 MiB a slot, 32 slots
    // 276 MiB from 342 tokens a call on, 6 slots in the 64-token activations the plan counts.
    int prefill_stage_slots = 32;
};

// Decode state of one sequence on the GPU model, mirroring DecodeState: with attention on the
// GPU, `device` holds every layer's sliding ring [W, Dh] and each compressor's pending window,
// previous window (CSA) and entries (main and indexer) for max_context tokens; with attention
// on the CPU, `attention` is the CPU's own DecodeState. position counts the tokens run.
// With several GPUs each holds the state of its own layers: `device` the first GPU's,
// `next_devices` the second's, third's, ... (empty on one GPU).
// The MTP layer's own state (GpuModel::new_mtp_state) is a GpuDecodeState too, holding only
// `mtp` (its ring [W, Dh], a saved copy of the ring, the store of the trunk's streams of the
// last W positions by position mod W, and the layer's last output streams) and mtp_position;
// the trunk's forward never writes it, so the trunk's snapshot and rewind ranges leave it out:
// its owner (the MTP drafter) puts its ring back itself after guesses the trunk has not
// confirmed, and starts it afresh after a restore, as on the CPU (mtp_drafter.hpp).
struct GpuDecodeState {
    std::int64_t position = 0;
    Buffer device;
    std::vector<Buffer> next_devices;
    DecodeState attention;
    Buffer mtp;
    std::int64_t mtp_position = 0;
};

// DSpark's stages' own state (GpuModel::new_dspark_state), in one device buffer: each stage's
// ring [W, Dh] (only the trunk's confirmed positions: the block reads it, never writes it),
// the last draft block's logits [γ, V] and pre-norm outputs y [γ, D], and the scratch of the
// ring fill and the Markov correction. first and position as DsparkState's: the block sees
// ring positions from first on, and position is the next one to fill (the block's first).
struct GpuDsparkState {
    Buffer device;
    std::int64_t first = 0, position = 0;
    bool has_block = false;
};

// A greedy DSpark chain's result (GpuModel::dspark_greedy): the guesses and their confidences.
// How GpuModel::forward_ids draws its picks instead of taking the argmax (kernels/
// speculative_rows.hpp; libaff/runtime/sampled_pick.hpp states the rule): the temperature,
// two uniforms in [0, 1) for each row returned ([accept, draw]), and how many of the first
// rows verify a guess, row j the call's token j + 1 against q row j: the last sampled draft
// chain's q rows where they are still on the device (q_from_last_chain), else the host rows q
// [guesses, V] (copied up).
struct RowDraws {
    float temperature = 1.0f;
    std::span<const double> uniforms;
    std::size_t guesses = 0;
    bool q_from_last_chain = false;
    std::span<const float> q;
};

struct DsparkGreedy {
    std::vector<std::int32_t> ids;
    std::vector<float> confidences;
    std::vector<float> q;  // a sampled chain's: the rows [count, V] its guesses were drawn from
};

// Where the MTP layer's streams come from (GpuModel::mtp_forward).
enum class MtpInput {
    trunk,  // the trunk's streams of positions mtp_position.., from the state's store (keep_streams)
    own,    // one token: the MTP layer's own output streams of its last call (a chained guess)
};

// A host copy of one sequence's decode state at its position (GpuModel::snapshot), for the
// server's prefix cache. With attention on the GPU, `device` holds only what a state at that
// position uses (GpuModel::snapshot_ranges): each layer's ring rows of the last min(position,
// W) tokens, each compressor's pending and previous windows and its position / ratio
// entries; not the max_context tokens' worth the state buffer is sized for. With attention on
// the CPU, `attention` is a copy of the CPU state. Only the model that took it restores it.
struct GpuStateSnapshot {
    std::int64_t position = 0;
    std::vector<std::uint8_t> device;  // the ranges of snapshot_ranges(position), one after another
    DecodeState attention;
    const void* model = nullptr;       // the GpuModel that took it (checked by restore)
};

// One stretch of a GpuDecodeState's device buffer: [offset, offset + bytes) of the buffer of
// GPU `part` of a split model (0: GpuDecodeState::device, i: next_devices[i - 1]).
struct StateRange {
    std::size_t offset = 0, bytes = 0;
    int part = 0;
};

// What a call may change in a sequence's state that the state at the call's start still reads,
// copied device to device before the call (GpuModel::rewind_point), so that GpuModel::rewind
// can put the state back at that position after it: the ring rows of the slots the call's
// positions take and each compressor's pending and previous windows (the entries the call
// emits lie past the start's, which never reads them: the position counts the entries).
// With attention on the CPU, a copy of the CPU state. Only the model that took it rewinds
// with it; buffers are reused when a point is taken again.
struct GpuRewindPoint {
    std::int64_t position = 0;       // where rewind goes back to
    std::int64_t end = 0;            // the position after the call it was taken for
    std::vector<StateRange> ranges;  // of every part, in order
    std::vector<Buffer> copies;      // one per part: its ranges, one after another
    DecodeState attention;           // attention on the CPU
    const void* model = nullptr;
};

// Bytes the model needs on the device, by class (planned before anything is allocated);
// with several GPUs, the sum over them.
struct GpuMemoryPlan {
    std::size_t dense_bytes = 0;    // everything but routed experts
    std::size_t expert_bytes = 0;   // routed experts of every layer
    std::size_t scratch_bytes = 0;  // activations for 64 tokens a call (more are allocated on demand)
    std::size_t state_bytes = 0;    // one sequence's attention state (GpuDecodeState::device)
    std::size_t total() const { return dense_bytes + expert_bytes + scratch_bytes + state_bytes; }
};

// Where one routed expert's extent is now (GpuModel::expert_extent).
struct GpuExpertExtent {
    const void* address = nullptr;  // the address the kernels read (device memory, or mapped pinned host memory)
    std::size_t bytes = 0;          // the extent's size: what a move copies
    int device = 0;                 // the GPU whose kernels read it (its layer's)
};

// Where the routed experts live and what the mover did (GpuModel::tiers). Hits and bytes are
// the placement engine's (placement/engine.hpp) over the calls the mover saw: every call,
// prefill chunks of any length included (their routing from the route ring, route_ring.hpp).
struct GpuTierReport {
    bool tiered = false;
    std::string why;                // why tiered, or why not
    placement::TierInputs inputs;   // what the plan was made from
    placement::TierPlan plan;       // plan_tiers(inputs)
    std::int64_t on_gpu = 0, in_pool = 0;  // experts now in each tier (counted from the table)
    std::string strategy;
    placement::Counters counters;   // the engine's
    std::uint64_t tokens = 0;       // tokens of the calls the mover saw
    std::uint64_t moves = 0;        // promotions executed (each also demotes one expert to the pool)
    std::uint64_t moved_bytes = 0;  // bytes copied over the bus by them (both directions)
    double move_seconds = 0;        // host time the mover took (deciding and queueing its copies)
    double copy_seconds = 0;        // the copy stream's busy time over the passes (the copies run beside the host)
    double stall_seconds = 0;       // time the model's stream waited on the copies before a call (mover stalls)
    std::uint64_t stalled_calls = 0;  // calls that waited on copies at all
    std::uint64_t waited_calls = 0;   // calls queued behind a pass's copies (stalled or not)
    // The SSD tier (experts in neither the slab nor the pool): experts there now (table entries
    // at a staging slot or null), where its reads come from, expert reads and their bytes (the
    // read-ahead's included), how many of them the hash layers' read-ahead issued, host
    // synchronizes after a router, SSD experts promoted into the slab, host seconds blocked on reads.
    std::int64_t on_ssd = 0;
    std::string ssd_source;
    std::uint64_t ssd_reads = 0, ssd_bytes = 0, ssd_read_ahead = 0, ssd_syncs = 0, ssd_promoted = 0;
    double ssd_wait_seconds = 0;
    // The prefill GEMMs' staging (PrefillStaging) over every call so far: bus-read experts
    // copied into scratch slots (each once: extent_bytes over the bus) and the 64-job GEMM tiles
    // they had (what they would have read in place), the bus-read experts the GEMMs read in
    // place and their tiles (each tile reads w1, w3 and w2 over the bus once).
    std::uint64_t staged_experts = 0, staged_tiles = 0, in_place_experts = 0, in_place_tiles = 0;
    // The decode prefetch (GpuTierOptions::prefetch_experts) over every call so far: pooled
    // experts copied into HBM during attention, how many of them the router then chose, and
    // predicted pooled experts left on the bus (no slot left for them).
    std::uint64_t prefetched_experts = 0, prefetch_hits = 0, prefetch_left = 0;
    // One line: the start-up plan (TierPlan::describe).
    std::string describe() const;
    // One line: hit rate per tier (SSD reads included), PCIe bytes, moves per token and the
    // mover's stalls.
    std::string summary() const;
};

// One decode step timed op class by op class (GpuModel::profile_decode): the launches are
// issued one by one with an event at each class boundary, so the total exceeds a replayed
// graph's step by the launch gaps; what it shows is where the time goes.
struct GpuStepProfile {
    std::vector<std::pair<std::string, double>> classes;  // ms per op class, summed over layers, in first-seen order
    std::vector<double> layer_ms;                         // ms per layer (embedding and head excluded)
    double total_ms = 0.0;
    std::vector<float> logits;                            // as decode returns them
};

class GpuModel {
public:
    // Uploads the weights of `cpu` (which must outlive this object: attention still runs on it).
    // `weights`, when given, is the file `cpu` was loaded from (a Checkpoint or a
    // ContainerTensorReader); it supplies the FP8 bytes and scales of dense FP8 tensors and is
    // needed only during construction. Throws a device error naming how many MiB are missing
    // when the model does not fit.
    GpuModel(const Model& cpu, const TensorReader* weights, const GpuOptions& options);
    ~GpuModel();
    GpuModel(const GpuModel&) = delete;
    GpuModel& operator=(const GpuModel&) = delete;

    const ModelConfig& config() const;
    const GpuMemoryPlan& memory_plan() const;
    // One line per weight class: where it lives and in which form (for --verbose output and
    // tests); with several GPUs, which layers are on which.
    std::string describe() const;
    // The device ordinals the layers are split across, in order (one entry on one GPU), and
    // the layers on each: device i runs layers layer_split()[i].first .. .second - 1.
    std::vector<int> devices() const;
    std::vector<std::pair<int, int>> layer_split() const;

    GpuDecodeState new_state() const;

    // Same contract as Model::forward: runs tokens at st.position.. and returns [n, V] logits
    // when all_logits, else the last row [V].
    std::vector<float> forward(GpuDecodeState& st, std::span<const std::int32_t> tokens, bool all_logits);
    // forward's greedy picks on the device: the same call (decode steps replay the same
    // graphs), then argmax_rows (kernels/argmax.hpp: greedy_pick's rule) over the first
    // `candidates` ids (1..V) of each row forward would return; only those ids come to the
    // host (n·4 bytes instead of n·V·4, one wait as forward's). Taps, route reports and the
    // mover as forward's. With `draws`, each row's pick is speculative_rows' draw instead
    // (throws usage for draws that do not fit the rows, or q rows no chain left).
    std::vector<std::int32_t> forward_ids(GpuDecodeState& st, std::span<const std::int32_t> tokens, bool all_rows,
                                          std::size_t candidates, const RowDraws* draws = nullptr);

    // One decode step for each of 1..kDecodeBatchMax distinct sequences: tokens[i] runs at
    // states[i]->position; returns [B, V] logits, row i for sequence i (the same as each
    // alone, up to fp32 summation order in the batched GEMVs).
    std::vector<float> decode(std::span<GpuDecodeState* const> states, std::span<const std::int32_t> tokens);

    // Prefix snapshots (the server's cache, through libaff/runtime/gpu_sequence.hpp): snapshot
    // copies what the state uses at its position to host memory; restore writes it back into
    // `st` (any state of this model: its other bytes are never read at that position) and sets
    // its position.
    // A restored state continues bit for bit as the original would have: forward and decode
    // after restore give the logits the original's same calls give (tests/gpu/snapshot_test.cpp).
    // restore throws usage for a snapshot another model took.
    GpuStateSnapshot snapshot(const GpuDecodeState& st) const;
    void restore(GpuDecodeState& st, const GpuStateSnapshot& snapshot) const;
    // The stretches of the state buffers a state at `position` uses (empty with attention on
    // the CPU), part by part, in ascending order, neighbours less than an alignment apart merged.
    std::vector<StateRange> snapshot_ranges(std::int64_t position) const;

    // Codebook-stored routed experts: each is one extent laid out as the container lays one
    // out (formats/container.md §7.5: w1, w2, w3, each at a 64-byte multiple from its start),
    // and the kernels find it through the expert table [layer][expert] → address, which they
    // read when they run, so a replayed decode graph reads whatever the table says then.
    // expert_extent says where an extent is; move_expert points its entry at `address`, which
    // must hold a copy of the extent's bytes, 16-byte aligned, in memory the layer's GPU
    // reads: its device memory, or mapped pinned host memory (PinnedBuffer::device_data). It
    // returns once the work queued before it is done, so the old place may then be freed or
    // reused. Both throw usage for dense experts (experts_codebook false in describe()) or
    // an index out of range.
    GpuExpertExtent expert_extent(int layer, int expert) const;
    void move_expert(int layer, int expert, const void* address);
    // Route traces: `observer` (not owned; null: none) sees every later call's routing as the
    // CPU reference reports it (model/route_observer.hpp): after a forward's or decode's logits,
    // each main layer's ids and gate weights from the route ring the router kernel wrote in the
    // call (route_ring.hpp; captured graphs included), then on_forward_end; a decode of several
    // sequences as one forward each, in the order of `states` (RouteRecorder::begin names each);
    // an mtp_forward as Model::mtp_forward's: layer num_layers at its first MTP position, then
    // on_forward_end (not through the ring: the tiers' mover never sees it). Changes nothing
    // computed, captures no graph, adds one copy a call (after the logits', same wait); unsupported with no_routed_experts.
    void set_route_observer(RouteObserver* observer);
    // Decode graphs captured so far, over every part (a move must not cause one: tests).
    std::size_t graphs_captured() const;
    // The expert tiers: the plan, where the experts are, the mover's counters (tiered false
    // when every expert is in the weight arena).
    GpuTierReport tiers() const;
    // The tier of each routed expert of the main layers, layer-major ([layer * n_routed_experts
    // + expert]), from the address its table entry points at (forward_tier_map.cpp); empty when
    // not tiered.
    std::vector<placement::Tier> expert_tier_map() const;

    // Rewind (speculative decoding: going back past rejected draft tokens): before a call of
    // `tokens` tokens on st, rewind_point copies what the call may change (GpuRewindPoint)
    // into device buffers, queued on the parts' streams before the call's launches (no wait);
    // after the call, rewind copies it back and sets st.position to the point's, so st
    // continues bit for bit as a state that never ran the call (tests/gpu/rewind_test.cpp).
    // To go back over several calls, rewind through their points newest first: rewind throws
    // usage unless st is at the point's end (nothing run since) and the point is this
    // model's. rewind_ranges lists the stretches (part by part, ascending, neighbours less
    // than an alignment apart merged).
    GpuRewindPoint rewind_point(const GpuDecodeState& st, int tokens) const;
    void rewind_point(const GpuDecodeState& st, int tokens, GpuRewindPoint& point) const;
    void rewind(GpuDecodeState& st, const GpuRewindPoint& point) const;
    std::vector<StateRange> rewind_ranges(std::int64_t position, int tokens) const;

    // MTP drafts (model doc §5.1; forward_mtp.cpp). has_mtp: the model has an MTP layer and it
    // is on the device (else mtp_why_not() says why); the calls below throw unsupported then.
    bool has_mtp() const;
    std::string mtp_why_not() const;
    // A state for the MTP layer (see GpuDecodeState): empty ring, position 0.
    GpuDecodeState new_mtp_state() const;
    // Copies rows [from_row, from_row + rows) of the final streams [n, hc_mult, D] of this
    // model's last forward or decode call (of one sequence: row i is its i-th token) into
    // mtp's store at positions position..; device to device, queued, no wait. rows <= W.
    // Call it before any other call of this model: the next one overwrites those streams.
    void keep_streams(GpuDecodeState& mtp, std::int64_t position, int from_row, int rows) const;
    // Model::mtp_forward on the device: the MTP layer at positions mtp.mtp_position .. + n on
    // the streams `from` names and the tokens that follow them, advancing mtp_position by n;
    // returns the logits of the last row [V], or of every row [n, V] when all_logits. Its
    // output streams of the last row are kept for a chained call (MtpInput::own, n == 1).
    // Projections take the GEMVs (fp32 activations) whatever the length; routing: set_route_observer.
    std::vector<float> mtp_forward(GpuDecodeState& mtp, std::span<const std::int32_t> next_tokens, MtpInput from,
                                   bool all_logits = false);
    // A greedy draft chain on the device (temperature 0: MtpDrafter's plain guesses): the
    // mtp_forward over next_tokens (MtpInput::trunk), whose last row's argmax (kernels/argmax.hpp,
    // the host pick's rule) is guess 0, then k - 1 chained steps (MtpInput::own), each on the
    // previous guess, which the argmax writes straight into the embedding's token buffer; the
    // ring is saved before the chained steps and put back after them, mtp_position left at
    // its value after the first call: the state exactly as MtpDrafter's chained path on
    // mtp_forward leaves it. Returns the k guesses, the only copy to the host (one wait); with a
    // route observer each step's routing is reported as mtp_forward's (and each step waits).
    // 1 <= k <= the sliding window (throws usage).
    std::vector<std::int32_t> mtp_draft_greedy(GpuDecodeState& mtp, std::span<const std::int32_t> next_tokens,
                                               std::size_t k);
    // mtp_draft_greedy's chain with each guess drawn on the device instead (kernels/
    // sample_rows.hpp): guess j from q_j = softmax(logits_j / temperature), no top-k, top-p or
    // min-p, by the draw uniforms[j] in [0, 1) (the caller's generator: the drafter's own
    // sampler; a float on the device, never rounded up to 1), q_j's rows into *q [k, V], or
    // (q null) left on the device, where a verify call's RowDraws::q_from_last_chain reads
    // them and last_chain_q copies them. One copy of the ids (and the q rows) to the host,
    // one wait: no host round trip per guess. Speculative sampling against the trunk's own
    // (filtered) distribution keeps the output distribution for any q that is the one drawn
    // from. Throws usage for temperature <= 0, draws not one a guess or outside [0, 1).
    std::vector<std::int32_t> mtp_draft_sampled(GpuDecodeState& mtp, std::span<const std::int32_t> next_tokens,
                                                std::size_t k, float temperature, std::span<const double> uniforms,
                                                std::vector<float>* q);
    // The first `rows` q rows [rows, V] of the last sampled chain (MTP's or DSpark's) in host
    // memory; throws usage when no sampled chain left that many.
    std::vector<float> last_chain_q(std::size_t rows) const;
    // Empties the MTP ring (zeros, as a fresh CPU state's) and sets mtp_position.
    void mtp_restart(GpuDecodeState& mtp, std::int64_t position) const;
    // Saves the ring, or puts the saved copy back and sets mtp_position (chained guesses
    // write ring rows the trunk has not confirmed). Device to device, queued.
    void mtp_save_ring(GpuDecodeState& mtp) const;
    void mtp_restore_ring(GpuDecodeState& mtp, std::int64_t position) const;
    // The MTP ring [W, Dh] in host memory (tests).
    std::vector<float> mtp_ring(const GpuDecodeState& mtp) const;

    // DSpark's stages on the device (model doc §5.2; forward_dspark.cpp: Model::dspark_* step
    // by step). has_dspark: the model has stages and they are on the device (else
    // dspark_why_not() says why); the calls below throw unsupported then.
    bool has_dspark() const;
    std::string dspark_why_not() const;
    // Empty rings (zeros, as a fresh CPU state's), first = position = `position`.
    GpuDsparkState new_dspark_state(std::int64_t position = 0) const;
    void dspark_restart(GpuDsparkState& st, std::int64_t position) const;
    // Model::dspark_extend: taps [n, taps, D] (host) of positions st.position .. + n into the
    // rings, advancing st.position by n.
    void dspark_extend(GpuDsparkState& st, std::span<const float> taps);
    // Model::dspark_block for `anchor` at st.position: the block's logits and y stay in st.
    // With a route observer (set_route_observer) the stages' routing is reported as
    // Model::dspark_block reports it: layers num_layers + s, one call (forward_routes.cpp).
    void dspark_block(GpuDsparkState& st, std::int32_t anchor);
    // Row i of the last block's logits plus markov_w2 · markov_w1[prev] (Model::dspark_markov),
    // in host memory; and row i of y (for Model::dspark_confidence).
    std::vector<float> dspark_guess_logits(GpuDsparkState& st, std::size_t i, std::int32_t prev);
    std::vector<float> dspark_y(const GpuDsparkState& st, std::size_t i) const;
    // The greedy chain of the last block on the device (temperature 0: the drafter's plain
    // guesses), `count` guesses (1..γ): guess i is the argmax (kernels/argmax.hpp: the host
    // pick's rule) of dspark_guess_logits(st, i, prev_i), prev_0 = anchor (the block's) and
    // prev_i = guess i - 1, its id fed to the next gather on the device; confidence i is
    // Model::dspark_confidence(y_i, prev_i), its dot one GEMV on the device (the sigmoid on the
    // host), so within fp32 reordering of the host's D + r products. One copy to the host.
    DsparkGreedy dspark_greedy(GpuDsparkState& st, std::int32_t anchor, std::size_t count);
    // dspark_greedy's chain with each guess drawn on the device instead (kernels/
    // sample_rows.hpp, as mtp_draft_sampled's): guess i from q_i = softmax(corrected row i /
    // temperature) by uniforms[i] in [0, 1), q's rows into the result's q, or (q_to_host false)
    // left on the device as mtp_draft_sampled's. One copy to the host.
    // Throws usage for temperature <= 0, draws not one a guess or outside [0, 1).
    DsparkGreedy dspark_sampled(GpuDsparkState& st, std::int32_t anchor, std::size_t count, float temperature,
                                std::span<const double> uniforms, bool q_to_host = true);
    // Stage s's ring [W, Dh] in host memory (tests).
    std::vector<float> dspark_ring(const GpuDsparkState& st, std::size_t stage) const;
    // Whether the stages' routed experts are in host memory (DraftPlacement ram, or automatic
    // on a tiered trunk); false: in VRAM.
    bool dspark_experts_in_host() const;

    // DSpark taps (model doc §5.2; forward_taps.cpp), for the DSpark drafter on a GPU trunk:
    // while on, each forward and decode call also gives last_taps(), [n, taps, D]: the plain
    // mean of the hc streams after each of config.dspark.tap_layers (after the layer's last
    // expand), what the CPU reference puts in DecodeState::taps; a decode of B sequences
    // gives B rows, sequence i's in row i. The taps read the streams and never write them:
    // the logits are the same bit for bit with taps on or off (tests/gpu/dspark_test.cpp).
    // Off by default (no copies then); the decode graphs of each kind are kept (the tap rows'
    // buffer too, once made, until the model goes), so switching often costs nothing. One GPU
    // only: set_taps(true) throws unsupported for a split model or a model without tap layers.
    void set_taps(bool on);
    bool taps_on() const;
    // GpuOptions::draft_placement as given (the host-stage DSpark runner refuses anything but
    // automatic: its stages' experts are the CPU's).
    DraftPlacement draft_placement() const;
    std::span<const float> last_taps() const { return taps_; }

    // Diagnostics and benchmarks (tests/bench/decode_bench.cpp):
    // decode, timed per op class (see GpuStepProfile); the sequences advance as in decode.
    GpuStepProfile profile_decode(std::span<GpuDecodeState* const> states, std::span<const std::int32_t> tokens);
    // Runs only the first `layers` layers from now on (ForwardOptions::max_layers; -1: all).
    void set_max_layers(int layers);
    // While on, every call takes the GEMVs whatever its length (as decode steps do), so its
    // rows round as single steps' do: the verify calls of speculative decoding, whose argmaxes
    // must be those of single steps (gpu_sequence.hpp turns it on while it keeps undo records).
    void set_gemv_calls(bool on);
    // Least bytes of weights a decode step of `sequences` sequences reads from device memory
    // as this model stores them: the head, the embedding rows, and of each layer run every
    // weight but the routed experts plus k routed experts per sequence (all distinct).
    std::size_t decode_read_bytes(int sequences) const;
    // Least bytes of one sequence's attention state a decode step at `position` reads: the
    // window of every layer, the indexer's keys and the selected entries (CSA), the entries (HCA).
    std::size_t decode_state_read_bytes(std::int64_t position) const;

private:
    // snapshot and restore: the bytes of `ranges` of st's part buffers into to_host (snapshot)
    // or from from_host (restore; the other pointer null), packed one after another, after
    // checking st is this model's; returns once every part's stream is done (snapshot's bytes
    // complete, restore's source free to go).
    void copy_state(const GpuDecodeState& st, const std::vector<StateRange>& ranges, std::uint8_t* to_host,
                    const std::uint8_t* from_host, const char* what) const;

    struct Impl;
    // What a call gives back: its logits, or (forward_ids) only each row's pick among the
    // first `candidates` ids, into *ids.
    struct CallOutput {
        std::vector<std::int32_t>* ids = nullptr;  // null: the logits
        int candidates = 0;
        const RowDraws* draws = nullptr;  // with ids: drawn picks instead of the argmax
    };
    std::vector<float> forward_call(GpuDecodeState& st, std::span<const std::int32_t> tokens, bool all_logits,
                                    CallOutput out);
    std::vector<float> decode_call(std::span<GpuDecodeState* const> states, std::span<const std::int32_t> tokens,
                                   CallOutput out);
    // The end of every call, after its launches: the last part's logits (`rows` x V) copied
    // back, or their picks (CallOutput), each part's route ring queued after them where the
    // mover or an observer reads it, one wait per part; then the mover and the observer's
    // events (report_routes). starts: one entry (the call's first position), or one per
    // token (a decode of that many sequences, each at its own position, reported as a
    // forward each). Returns the logits (empty when out.ids is set).
    std::vector<float> finish_call(std::size_t rows, std::span<const std::int32_t> tokens,
                                   std::span<const std::int64_t> starts, CallOutput out);
    void report_routes(std::span<const std::int32_t> tokens, std::span<const std::int64_t> starts);
    // finish_call's part of the taps (forward_taps.cpp): the n rows' copies queued to the host
    // after the logits, and their means once the stream is done.
    void queue_taps(int n);
    void average_taps(int n);
    // Where a call of n rows' tap streams land on the host (made on first use).
    float* tap_streams_host(int n);
    // The part that holds `layer`'s experts, after checking both indices (expert_extent, move_expert).
    Impl& expert_owner(int layer, int expert, const char* what) const;
    // The draft chains' draws (greedy: none): mtp_draft_chain's q rows go to *q, dspark_chain's
    // into its result.
    struct ChainDraws {
        float temperature;
        std::span<const double> uniforms;
        std::vector<float>* q = nullptr;  // null: the q rows stay on the device (last_chain_q)
    };
    std::vector<std::int32_t> mtp_draft_chain(GpuDecodeState& mtp, std::span<const std::int32_t> next_tokens,
                                              std::size_t k, const ChainDraws* draws, const char* what);
    DsparkGreedy dspark_chain(GpuDsparkState& st, std::int32_t anchor, std::size_t count, const ChainDraws* draws,
                              const char* what);
    // The draws checked (temperature > 0, one a guess, in [0, 1)), made floats in `host` (kept
    // by the caller until its wait; a double just under 1 stays under 1) and put on the device
    // beside room for `rows` q rows of V in Impl::chain_draws; returns where the draws went.
    float* upload_draws(Impl& m, const ChainDraws& draws, std::size_t rows, std::vector<float>& host,
                        const char* what) const;
    // The part that runs the MTP layer, after checking it has it and `mtp` (when given) is an
    // MTP state of this model; its device made current (forward_mtp.cpp).
    Impl& mtp_part(const GpuDecodeState* mtp, const char* what) const;
    // The same for DSpark's stages and a GpuDsparkState (forward_dspark.cpp).
    Impl& dspark_part(const GpuDsparkState* st, const char* what) const;

    std::vector<std::unique_ptr<Impl>> shards_;  // one per device, each a contiguous range of layers
    GpuMemoryPlan plan_;                          // the shards' plans summed
    RouteObserver* routes_ = nullptr;             // set_route_observer
    // The last call's tap streams [tap][n, hc, D] (tap_streams_host) and their means [n, taps, D].
    // Calls of up to kPinnedTapRows rows (decode steps, verify calls) copy into page-locked
    // memory (a copy to pageable memory goes through the runtime's staging: the taps' share of
    // a decode step fell from ~0.12 to 0.071 ms, dspark_gpu_bench); longer calls (a prompt's,
    // 64 KiB a row a tap) into a plain vector rather than pin megabytes.
    static constexpr int kPinnedTapRows = 8;
    PinnedBuffer tap_pinned_;
    std::vector<float> tap_pageable_;
    std::vector<float> taps_;
};

}  // namespace aff::gpu
