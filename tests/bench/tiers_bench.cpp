// Benchmark: decode with the routed experts tiered (issue 17's scenarios). A real-geometry
// container (make_geometry_container, best with --route-skew v4flash: random gates route near
// uniformly) is loaded once on the CPU; for each scenario a GpuModel is built with the expert
// slab capped (GpuTierOptions::slab_cap, what --gpu-expert-mib sets) so that it holds the
// fraction of the experts a card of CARD GiB would hold of the whole V4-Flash, the rest in the
// pinned host pool. The fraction:
//     slab = CARD − dense − headroom − rest,   fraction = slab / routed,
//   routed = 43 · 256 experts · this container's slot (8.625 MiB at TQ2875: 92.7 GiB),
//   dense  = 8.24 GiB (V4-Flash's dense weights as stored, libaff/placement/tensor_split's figure),
//   headroom = placement::derived_headroom(CARD) (3 % of the card, at least 256 MiB),
//   rest   = the runtime reserve (256 MiB) + this model's activations + one sequence's state
//            scaled to 43 layers (what the GPU model plans: GpuMemoryPlan).
// First, the baseline: every expert in the weight arena (the container fits the device). It
// also gives the calibration profile: the resident model's routing over a calibration stream
// (another seed of the same token distribution, what `aff-profile` on calibration text gives a
// user) counted per (layer, expert) through the route observer.
// Each card runs the mover variants of TIERS_VARIANTS (comma-separated; default the first three):
//   heat            the default: the GPU mover's heat knobs (placement::gpu_mover_heat_options:
//                   one move a dispatch, twice the victim's heat and 8 more), key order start;
//   eager-heat      the same start with replay's knobs (HeatOptions{}: 4 moves, 0.25, 0.5);
//   static+profile  the calibration profile's busiest experts in the slab, nothing moves;
//   heat+profile    the same start, then the default heat mover;
//   eager-heat+profile  the same start, then the eager one.
// Any of them with ":pfN" appended runs with the decode prefetch at N experts a layer
// (GpuTierOptions::prefetch_experts, --expert-prefetch; without the suffix the default, 1);
// ":pf0" is the prefetch off; ":pfNbB" also sets its copy's blocks (prefetch_copy_blocks, 0 a
// full grid), ":pfNbBdD" its loads in flight per thread (prefetch_copy_depth, 4 or 8),
// ":pfNbBdDtK" the bulk copy (prefetch_copy_bulk; D its chunks of K KiB in flight a block,
// prefetch_copy_chunk_kib, default 16); ":nograph" (before ":pf") launches without graphs. TIERS_PROFILE set: each scenario's batch 1 also prints
// GpuModel::profile_decode's op-class breakdown of one step (launches one by one). The prefetch's own figures (experts a token copied during
// attention, the share the router chose) are printed per scenario; the floor stays the
// routing's own bytes (a wrong prefetch's bytes are a cost the ratio shows).
// TIERS_SSD_CARD (default 24; empty: none) adds the SSD scenario on that card: the host pool
// capped (GpuTierOptions::host_pool, what --host-pool-mib sets) at TIERS_SSD_POOL_SHARE
// (default 0.5) of the experts the slab does not hold, the rest left on the SSD, placement
// static+profile.
// Tokens are teacher-forced from a Zipf stream over the vocabulary (exponent 1.05 over a
// random ranking, as libaff/trace/synthetic's token stream: it drives the hash-routed layers'
// skew). Per scenario, batch 1 and 4: a warm-up of WARM calls (the mover learns), then STEPS
// timed decode calls; figures over the timed calls: ms a token, hit rate per tier (the
// placement engine's counters), moves and mover stalls a token, and the floor
//     floor = HBM bytes / HBM read ceiling + pool bytes / mapped-read ceiling
//             + SSD bytes / O_DIRECT read rate,
//   HBM bytes = the step's resident reads (GpuModel::decode_read_bytes less its routed part,
//               plus the attention state) + slab hits · slot bytes,
//   pool bytes = (pool hits + SSD hits) · slot bytes (the kernels read pooled and staged
//                experts over the bus),
//   SSD bytes = the bytes the SSD tier read from the drive (GpuTierReport::ssd_bytes: a
//               staging slot still holding an expert serves it again without a read),
// the three ceilings measured in this run (libaff/gpu/read_ceiling.hpp; the O_DIRECT rate
// with ExtentReader on the container itself, 8 threads and 2 MiB pieces as the SSD tier reads).
// Moves are not in the floor: they are the mover's cost, which the ratio shows.
//     tiers_bench CONTAINER.aff STEPS WARM CARD_GIB [CARD_GIB ...]
#if defined(AFF_HAVE_GPU)
#include "bench_model.hpp"
#include "libaff/container/extent_reader.hpp"
#include "libaff/model/route_observer.hpp"
#include "libaff/placement/tier_plan.hpp"
#endif

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#if !defined(AFF_HAVE_GPU)
int main() {
    std::fprintf(stderr, "tiers_bench: needs a GPU build (cmake -DAFF_GPU=CUDA or HIP)\n");
    return 2;
}
#else

namespace {

using namespace aff::gpu;
using bench::median;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kDenseFlash = 8.24 * kGiB;          // V4-Flash's dense weights on one card (tensor_split)
constexpr int kFlashExperts = 43 * 256;
constexpr int kPrompt = 16;

// Token ids with a Zipf(1.05) popularity over a random ranking of the vocabulary.
class TokenStream {
public:
    TokenStream(int vocab, std::uint64_t seed) : rng_(seed), cdf_(std::size_t(vocab)), ids_(std::size_t(vocab)) {
        double sum = 0;
        for (int r = 0; r < vocab; ++r) cdf_[std::size_t(r)] = sum += std::pow(double(r + 1), -1.05);
        for (double& c : cdf_) c /= sum;
        std::iota(ids_.begin(), ids_.end(), 0);
        std::shuffle(ids_.begin(), ids_.end(), rng_);
    }
    std::int32_t next() {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
        const auto r = std::size_t(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
        return ids_[std::min(r, ids_.size() - 1)];
    }

private:
    std::mt19937_64 rng_;
    std::vector<double> cdf_;
    std::vector<std::int32_t> ids_;
};

struct Figures {
    double ms_token = 0, floor_ms_token = 0, gpu_hit = 0, pool_hit = 0, ssd_hit = 0, moves_token = 0, stall_ms_token = 0;
    double mover_host_ms_token = 0;  // host time the mover took between calls (GpuTierReport::move_seconds)
    double hbm_mb_token = 0, pool_mb_token = 0, ssd_mb_token = 0;
    double prefetched_token = 0, prefetch_used = 0;  // the decode prefetch: experts a token, % routed to
};

// Counts the router's selections per (layer, expert), layer-major: the calibration profile.
class SelectionCounter final : public aff::RouteObserver {
public:
    SelectionCounter(int layers, int experts) : experts_(experts), counts_(std::size_t(layers) * std::size_t(experts)) {}
    void on_route(const aff::RouteEvent& e) override {
        // Main layers only: an MTP call (layer L, when a draft runs) is not the tiers' routing.
        if (std::size_t(e.layer) * std::size_t(experts_) >= counts_.size()) return;
        for (const int x : e.experts) ++counts_[std::size_t(e.layer) * std::size_t(experts_) + std::size_t(x)];
    }
    void on_forward_end() override {}
    const std::vector<std::uint64_t>& counts() const { return counts_; }

private:
    int experts_;
    std::vector<std::uint64_t> counts_;
};

// Bytes/s of O_DIRECT reads of expert-sized extents spread over the container (the SSD tier's
// reader: 8 threads, 2 MiB pieces), one pass over `count` extents after one warm-up extent.
double measure_direct_read_rate(const std::string& path, std::uint64_t extent, int waves) {
    constexpr int kInFlight = 4;  // experts read at once: a layer's SSD experts are read together
    aff::ExtentReader reader(path, 8, true);
    if (!reader.direct()) std::printf("note: the filesystem refused O_DIRECT: the SSD rate is the page cache's\n");
    const std::uint64_t piece = 2u << 20, span = aff::ExtentReader::staging_bytes(extent);
    const std::uint64_t room = reader.file_size() > span ? reader.file_size() - span : 0;
    void* raw = nullptr;
    if (posix_memalign(&raw, aff::ExtentReader::kAlign, span * kInFlight) != 0)
        throw std::runtime_error("no memory for the O_DIRECT buffers");
    std::unique_ptr<void, decltype(&std::free)> buf(raw, &std::free);
    std::mt19937_64 rng(7);
    auto wave = [&] {
        std::vector<std::uint64_t> tickets;
        for (int x = 0; x < kInFlight; ++x) {
            const std::uint64_t at = room ? std::uniform_int_distribution<std::uint64_t>(0, room / 4096)(rng) * 4096 : 0;
            char* dst = static_cast<char*>(buf.get()) + std::uint64_t(x) * span;
            for (std::uint64_t o = 0; o < span; o += piece) tickets.push_back(reader.submit(at + o, std::min(piece, span - o), dst + o));
        }
        for (const std::uint64_t t : tickets) reader.wait(t);
    };
    wave();
    const auto a = std::chrono::steady_clock::now();
    for (int i = 0; i < waves; ++i) wave();
    return double(span) * kInFlight * waves / std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

std::vector<std::string> split_list(const char* text) {
    std::vector<std::string> out;
    std::stringstream in(text ? text : "");
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: tiers_bench CONTAINER.aff STEPS WARM CARD_GIB [CARD_GIB ...]\n");
        return 2;
    }
    try {
        const std::string path = argv[1];
        const int steps = std::max(3, std::atoi(argv[2])), warm = std::max(0, std::atoi(argv[3]));
        const DeviceInfo info = bench::open_bench_device();
        const double hbm = measure_read_ceiling(info.multiprocessors);
        std::printf("HBM read ceiling (streaming read, 4 GiB): %.3f TB/s\n", hbm / 1e12);
        const double pcie = bench::print_mapped_read_ceiling(info.multiprocessors);

        aff::ThreadPool pool(0);
        const bench::BenchModel m = bench::load_bench_cpu(path, pool);

        std::vector<Figures> all;
        std::vector<std::string> names;
        // Batch 1 and 4 on `g`: warm-up, then the timed calls.
        double ssd_rate = 0;  // measured before the first scenario with experts on the SSD
        auto measure = [&](GpuModel& g, const std::string& label) {
            const aff::ModelConfig& c = g.config();
            const int V = c.vocab_size, L = c.num_layers;
            const std::size_t extent = g.expert_extent(0, 0).bytes;
            for (const int B : {1, kDecodeBatchMax}) {
                TokenStream tokens(V, 1000 + std::uint64_t(B));
                std::vector<GpuDecodeState> states;
                std::vector<GpuDecodeState*> ptrs;
                for (int i = 0; i < B; ++i) states.push_back(g.new_state());
                for (auto& st : states) ptrs.push_back(&st);
                std::vector<std::int32_t> prompt(kPrompt), next(static_cast<std::size_t>(B));
                for (auto& st : states) {
                    for (auto& t : prompt) t = tokens.next();
                    g.forward(st, prompt, false);
                }
                auto call = [&] {
                    for (auto& t : next) t = tokens.next();
                    g.decode(std::span<GpuDecodeState* const>(ptrs.data(), std::size_t(B)), next);
                };
                for (int w = 0; w < warm; ++w) call();
                const GpuTierReport before = g.tiers();
                std::vector<double> ms;
                double state_bytes = 0;
                for (int st = 0; st < steps; ++st) {
                    state_bytes += double(B) * double(g.decode_state_read_bytes(states[0].position));
                    const auto a = std::chrono::steady_clock::now();
                    call();
                    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
                }
                const GpuTierReport after = g.tiers();
                const double tok = double(steps) * B;
                const double chosen = double(std::min(B * c.experts_per_token, c.n_routed_experts));
                const double resident = double(g.decode_read_bytes(B)) - double(L) * chosen * double(extent);
                double gpu_hits = 0, pool_hits = 0, ssd_hits = 0, reads = 0;
                if (after.tiered) {
                    gpu_hits = double(after.counters.gpu_hits - before.counters.gpu_hits);
                    pool_hits = double(after.counters.host_hits - before.counters.host_hits);
                    ssd_hits = double(after.counters.ssd_reads - before.counters.ssd_reads);
                    reads = double(after.counters.accesses - before.counters.accesses);
                } else {  // every expert in the arena: the step's routed reads as decode_read_bytes counts them
                    gpu_hits = reads = double(L) * chosen * steps;
                }
                const double hbm_bytes = resident * steps + state_bytes + gpu_hits * double(extent);
                // An SSD expert is read from the drive into a staging slot (ssd_bytes: the reads
                // made, the hash layers' read-ahead included; a slot still holding it serves a
                // later dispatch without a read) and the kernels read the slot over the bus.
                const double pool_bytes = (pool_hits + ssd_hits) * double(extent);
                const double ssd_bytes = after.tiered ? double(after.ssd_bytes - before.ssd_bytes) : 0.0;
                Figures f;
                f.ms_token = median(ms) / B;
                f.floor_ms_token = (hbm_bytes / hbm + pool_bytes / pcie + (ssd_bytes > 0 ? ssd_bytes / ssd_rate : 0)) * 1e3 / tok;
                f.gpu_hit = reads ? 100 * gpu_hits / reads : 0;
                f.pool_hit = reads ? 100 * pool_hits / reads : 0;
                f.ssd_hit = reads ? 100 * ssd_hits / reads : 0;
                f.moves_token = double(after.moves - before.moves) / tok;
                f.stall_ms_token = (after.stall_seconds - before.stall_seconds) * 1e3 / tok;
                f.mover_host_ms_token = (after.move_seconds - before.move_seconds) * 1e3 / tok;
                f.hbm_mb_token = hbm_bytes / tok / 1e6;
                f.pool_mb_token = pool_bytes / tok / 1e6;
                f.ssd_mb_token = ssd_bytes / tok / 1e6;
                if (after.tiered) {
                    f.prefetched_token = double(after.prefetched_experts - before.prefetched_experts) / tok;
                    const double copied = double(after.prefetched_experts - before.prefetched_experts);
                    f.prefetch_used = copied > 0 ? 100 * double(after.prefetch_hits - before.prefetch_hits) / copied : 0;
                }
                std::printf("[%s] batch %d: %.3f ms a token (median call %.3f ms over %d after %d warm-up), floor %.3f ms "
                            "(HBM %.1f MB, pool %.1f MB, SSD %.1f MB a token), ratio %.2f; hits: GPU %.1f %%, host pool %.1f %%, "
                            "SSD %.1f %%; %.2f moves a token, mover stalls %.3f ms a token, mover host time %.3f ms a token; "
                            "prefetch %.2f experts a token, %.1f %% of them routed to\n",
                            label.c_str(), B, f.ms_token, median(ms), steps, warm, f.floor_ms_token, f.hbm_mb_token,
                            f.pool_mb_token, f.ssd_mb_token, f.ms_token / f.floor_ms_token, f.gpu_hit, f.pool_hit, f.ssd_hit,
                            f.moves_token, f.stall_ms_token, f.mover_host_ms_token, f.prefetched_token, f.prefetch_used);
                all.push_back(f);
                names.push_back(label + ", batch " + std::to_string(B));
                if (B == 1 && std::getenv("TIERS_PROFILE")) {  // where the step's time goes (launches one by one)
                    for (auto& t : next) t = tokens.next();
                    const GpuStepProfile p = g.profile_decode(std::span<GpuDecodeState* const>(ptrs.data(), 1), next);
                    std::printf("[%s] batch 1 breakdown (non-graph, timed per class: %.3f ms):", label.c_str(), p.total_ms);
                    for (const auto& [what, ms] : p.classes) std::printf(" %s %.3f;", what.c_str(), ms);
                    std::printf("\n");
                }
            }
            if (g.tiers().tiered) std::printf("[%s] %s\n", label.c_str(), g.tiers().summary().c_str());
        };

        GpuOptions o;
        o.max_context = 4096;
        // The baseline: every expert in the weight arena (the container fits the device), which
        // also gives the slot size, what the GPU model plans besides the weights, and the
        // calibration profile (its routing over another stream of the same distribution).
        std::size_t slot = 0;
        std::int64_t experts = 0;
        GpuMemoryPlan plan;
        std::vector<std::uint64_t> profile;
        {
            const std::unique_ptr<GpuModel> built = bench::build_tier_model(m, o, "resident");
            GpuModel& g = *built;
            slot = bench::tier_slot_bytes(g);
            experts = std::int64_t(g.config().num_layers) * g.config().n_routed_experts;
            plan = g.memory_plan();
            {
                constexpr int kCalibration = 256;  // decode steps of one sequence after a 16-token prompt
                SelectionCounter counter(g.config().num_layers, g.config().n_routed_experts);
                g.set_route_observer(&counter);
                TokenStream tokens(g.config().vocab_size, 77);
                GpuDecodeState st = g.new_state();
                std::vector<std::int32_t> prompt(kPrompt);
                for (auto& t : prompt) t = tokens.next();
                g.forward(st, prompt, false);
                for (int i = 0; i < kCalibration; ++i) g.forward(st, std::vector<std::int32_t>{tokens.next()}, false);
                g.set_route_observer(nullptr);
                profile = counter.counts();
                const std::uint64_t total = std::accumulate(profile.begin(), profile.end(), std::uint64_t{0});
                std::printf("[resident] calibration profile: %llu selections over %d tokens (seed 77)\n",
                            (unsigned long long)total, kPrompt + kCalibration);
            }
            measure(g, "resident");
        }
        const std::vector<std::string> variants = split_list(std::getenv("TIERS_VARIANTS") ? std::getenv("TIERS_VARIANTS")
                                                                                            : "heat,static+profile,heat+profile");
        const std::string ssd_card = std::getenv("TIERS_SSD_CARD") ? std::getenv("TIERS_SSD_CARD") : "24";
        const double ssd_pool_share = std::getenv("TIERS_SSD_POOL_SHARE") ? std::atof(std::getenv("TIERS_SSD_POOL_SHARE")) : 0.5;
        auto tier_options = [&](std::string variant) {
            GpuOptions t = o;
            // A ":pfN" suffix sets the decode prefetch (--expert-prefetch N; default 1), and
            // ":pfNbB" its copy's blocks too (GpuTierOptions::prefetch_copy_blocks; 0 a full grid),
            // ":pfNbBdD" the loads in flight per copy thread (prefetch_copy_depth, 4 or 8), a
            // trailing 't' the bulk copy (prefetch_copy_bulk: depth = chunks in flight a block),
            // 'tK' with chunks of K KiB (prefetch_copy_chunk_kib: 4, 8 or 16).
            // ":nograph" (before any ":pf") issues the decode's launches one by one (GpuOptions::graphs
            // false): the captured graph's own cost, against the same launches.
            if (const std::size_t at = variant.find(":nograph"); at != std::string::npos) {
                t.graphs = false;
                variant.erase(at, 8);
            }
            if (const std::size_t at = variant.rfind(":pf"); at != std::string::npos) {
                t.tiers.prefetch_experts = std::atoi(variant.c_str() + at + 3);
                if (const std::size_t b = variant.find('b', at + 3); b != std::string::npos)
                    t.tiers.prefetch_copy_blocks = std::atoi(variant.c_str() + b + 1);
                if (const std::size_t d = variant.find('d', at + 3); d != std::string::npos)
                    t.tiers.prefetch_copy_depth = std::atoi(variant.c_str() + d + 1);
                if (const std::size_t k = variant.find('t', at + 3); k != std::string::npos) {
                    t.tiers.prefetch_copy_bulk = true;
                    if (std::isdigit(static_cast<unsigned char>(variant[k + 1])))
                        t.tiers.prefetch_copy_chunk_kib = std::atoi(variant.c_str() + k + 1);
                }
                variant.resize(at);
            }
            const bool eager = variant.rfind("eager-", 0) == 0;
            if (eager) t.tiers.heat = aff::placement::HeatOptions{};
            if (variant == "heat" || variant == "eager-heat") return t;
            if (variant == "static+profile") {
                t.tiers.strategy = "static";
            } else if (variant != "heat+profile" && variant != "eager-heat+profile") {
                throw std::runtime_error("TIERS_VARIANTS: unknown variant " + variant);
            }
            t.tiers.profile = profile;
            return t;
        };
        std::vector<std::string> cards(argv + 4, argv + argc);
        if (!ssd_card.empty()) cards.push_back(ssd_card + "+ssd");
        for (const std::string& arg : cards) {
            const bool ssd = arg.size() > 4 && arg.compare(arg.size() - 4, 4, "+ssd") == 0;
            const std::string card = ssd ? arg.substr(0, arg.size() - 4) : arg;
            const double card_bytes = std::atof(card.c_str()) * kGiB;
            if (!(card_bytes > 0)) throw std::runtime_error("CARD " + card + " is not a size in GiB");
            const double routed = double(kFlashExperts) * double(slot);
            const double state43 = double(plan.state_bytes) * 43.0 / double(m.cpu->config().num_layers);
            const double rest = double(256u << 20) + double(plan.scratch_bytes) + state43;
            const double headroom = double(aff::placement::derived_headroom(std::uint64_t(card_bytes)));
            const double slab = std::max(0.0, card_bytes - kDenseFlash - headroom - rest);
            const double fraction = std::min(1.0, slab / routed);
            const std::int64_t slots = std::int64_t(std::floor(fraction * double(experts)));
            std::printf("\n[%s GiB] slab = %.2f GiB card - %.2f dense - %.2f headroom - %.2f rest (reserve 0.25, activations "
                        "%.2f, state x43 layers %.2f) = %.2f GiB of %.2f GiB routed (43 x 256 x %.3f MiB) = %.1f %% -> %lld of "
                        "%lld experts here (--gpu-expert-mib %llu)\n",
                        card.c_str(), card_bytes / kGiB, kDenseFlash / kGiB, headroom / kGiB, rest / kGiB,
                        double(plan.scratch_bytes) / kGiB, state43 / kGiB, slab / kGiB, routed / kGiB,
                        double(slot) / (1 << 20), 100 * fraction, (long long)slots, (long long)experts,
                        (unsigned long long)((std::uint64_t(slots) * slot + (1u << 20) - 1) >> 20));
            for (const std::string& variant : ssd ? std::vector<std::string>{"static+profile"} : variants) {
                GpuOptions t = tier_options(variant);
                t.tiers.slab_cap = std::size_t(slots) * slot;
                std::string label = card + " GiB " + variant;
                if (ssd) {
                    const std::int64_t pooled = std::int64_t(std::floor(ssd_pool_share * double(experts - slots)));
                    t.tiers.host_pool = std::size_t(pooled) * slot;
                    label = card + " GiB+SSD " + variant;
                    std::printf("[%s] host pool capped at %lld of the %lld experts the slab does not hold (--host-pool-mib %llu), "
                                "%lld on the SSD\n",
                                label.c_str(), (long long)pooled, (long long)(experts - slots),
                                (unsigned long long)((std::uint64_t(pooled) * slot) >> 20), (long long)(experts - slots - pooled));
                    if (ssd_rate == 0) {
                        ssd_rate = measure_direct_read_rate(path, slot, 16);
                        std::printf("O_DIRECT read rate (ExtentReader, 8 threads, 4 experts in flight, 64 random extents of the container): %.2f GB/s\n",
                                    ssd_rate / 1e9);
                    }
                }
                measure(*bench::build_tier_model(m, t, label), label);
            }
        }
        std::printf("\n%-34s %9s %9s %7s %8s %8s %8s %8s %9s %7s %7s\n", "scenario", "ms/token", "floor ms", "ratio", "GPU hit",
                    "pool hit", "SSD hit", "moves/t", "stall ms", "pf/t", "pf used");
        double worst = 0;
        for (std::size_t i = 0; i < all.size(); ++i) {
            const Figures& f = all[i];
            worst = std::max(worst, f.ms_token / f.floor_ms_token);
            std::printf("%-34s %9.3f %9.3f %7.2f %7.1f%% %7.1f%% %7.1f%% %8.2f %9.3f %7.2f %6.1f%%\n", names[i].c_str(),
                        f.ms_token, f.floor_ms_token, f.ms_token / f.floor_ms_token, f.gpu_hit, f.pool_hit, f.ssd_hit,
                        f.moves_token, f.stall_ms_token, f.prefetched_token, f.prefetch_used);
        }
        std::printf("figure: worst ratio to the floor %.2f (goal <= 1.2); ceilings HBM %.3f TB/s, mapped read %.2f GB/s, O_DIRECT %.2f GB/s\n",
                    worst, hbm / 1e12, pcie / 1e9, ssd_rate / 1e9);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tiers_bench: %s\n", e.what());
        return 1;
    }
}
#endif
