// Device test of route traces on the GPU (GpuModel::set_route_observer; the route ring the
// router kernel writes inside every call, libaff/gpu/route_ring.hpp). Every trace is written
// by the RouteRecorder aff-run and aff-serve use and read back with read_route_trace.
//   cpu: on every tiny fixture, the GPU's trace against the CPU reference's routing of the
//     same tokens, for the prompt as one call of 80 tokens (past the 64 the tiers' log used to
//     hold), the same prompt in chunks 37 + 40 + 3, and 8 decode steps (captured graphs). On
//     the exact path (fp32 GEMVs): the expert ids are identical at every position whose choices
//     the CPU made by a relative margin of at least kNearTie (SelectionMargins, prompts drawn
//     again as forward_compare.hpp does: a near-tied choice is the one place a correct GPU may
//     choose otherwise), and the gate weights within kWeightTolerance (the GPU's router logits
//     differ from the CPU's in the last bits); every (sequence, position) is recorded exactly
//     once with its token and phase, every step has every layer.
//   batch: 3 sequences decoded together (GpuModel::decode) are recorded as a step per
//     sequence per call, each under its own sequence id and position, and agree with the CPU
//     as above.
//   logits: on the default path (prefill GEMMs, graphs) and the exact path, the logits of a
//     run with the recorder are bit for bit those without, and recording captures no graph.
//     The default path's trace is also held to what holds on any path: ids in range and
//     distinct per token, hash layers' ids the tid2eid rows, weights summing to the scale.
//   tiers: on a tiered model (half the experts in the slab, demand) the trace equals the
//     all-resident model's bit for bit, so do the logits, and the mover saw every token,
//     the 80-token prompt included (it reads the same ring).
#include "device_test.hpp"
#include "forward_compare.hpp"
#include "wide_container.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/trace/recorder.hpp"
#include "libaff/trace/route_trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>

using namespace aff::gpu::test;
using aff::trace::Phase;

namespace {

constexpr int kPrompt = 80;
constexpr int kDecode = 8;
constexpr int kAttempts = 4;  // prompts drawn per case (forward_compare draws 16; each costs a CPU run here)
constexpr double kWeightTolerance = kRouteWeightTolerance;  // forward_compare.hpp says why

// The CPU reference's routing of one sequence: prompt as one call, then the forced decode tokens.
struct Reference {
    std::vector<std::int32_t> tokens;        // prompt, then the decode steps' inputs
    int prompt = 0;
    int layers = 0, k = 0;
    std::vector<std::vector<int>> ids;       // [position][layer * k + j]
    std::vector<std::vector<float>> weights;
    int clean = 0;                           // positions before the first near-tied choice
};

// Each token's routing by position (a RouteObserver as the recorder sees it).
struct ByPosition final : aff::RouteObserver {
    Reference* r = nullptr;
    void on_route(const aff::RouteEvent& e) override {
        for (std::size_t i = 0; i < e.tokens.size(); ++i) {
            const std::size_t p = std::size_t(e.start) + i;
            if (r->ids.size() <= p) {
                r->ids.resize(p + 1, std::vector<int>(std::size_t(r->layers) * r->k, -1));
                r->weights.resize(p + 1, std::vector<float>(std::size_t(r->layers) * r->k, NAN));
            }
            for (int j = 0; j < r->k; ++j) {
                r->ids[p][std::size_t(e.layer) * r->k + j] = e.experts[i * r->k + j];
                r->weights[p][std::size_t(e.layer) * r->k + j] = e.weights[i * r->k + j];
            }
        }
    }
    void on_forward_end() override {}
};

Reference run_reference(const aff::Model& cpu, int prompt, int decode, std::uint64_t seed) {
    const aff::ModelConfig& c = cpu.config();
    Reference r;
    r.prompt = prompt;
    r.layers = c.num_layers;
    r.k = c.experts_per_token;
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int> tok(0, c.vocab_size - 1);
    r.tokens.resize(std::size_t(prompt + decode));
    for (auto& t : r.tokens) t = tok(gen);
    aff::SelectionMargins margins;
    ByPosition obs;
    obs.r = &r;
    aff::DecodeState st = cpu.new_state();
    st.margins = &margins;
    st.routes = &obs;
    cpu.forward(st, std::span<const std::int32_t>(r.tokens.data(), prompt), false);
    for (int i = prompt; i < prompt + decode; ++i) cpu.forward(st, std::span<const std::int32_t>(&r.tokens[i], 1), false);
    r.clean = prompt + decode;
    for (int p = 0; p < prompt + decode && p < int(margins.by_position.size()); ++p)
        if (margins.by_position[p] < kNearTie) {
            r.clean = p;
            break;
        }
    return r;
}

// The reference whose first near-tie comes latest of up to kAttempts seeds (none: all clean).
Reference pick_reference(const aff::Model& cpu, const std::string& name, int prompt, int decode) {
    std::uint64_t seed = std::hash<std::string>{}(name);
    Reference best;
    for (int a = 0; a < kAttempts; ++a) {
        Reference r = run_reference(cpu, prompt, decode, seed + a);
        if (a == 0 || r.clean > best.clean) best = std::move(r);
        if (best.clean == prompt + decode) break;
    }
    return best;
}

// A GPU run recorded to `path`: sequence `seq`'s prompt in `chunks`, then its decode tokens
// one call each; returns every call's logits, concatenated.
std::vector<float> run_gpu(aff::gpu::GpuModel& g, aff::gpu::GpuDecodeState& st, const Reference& r,
                           const std::vector<int>& chunks, aff::trace::RouteRecorder* rec, std::uint32_t seq) {
    std::vector<float> all;
    int at = 0;
    for (const int n : chunks) {
        if (rec) rec->begin(seq, Phase::prefill);
        const auto l = g.forward(st, std::span<const std::int32_t>(r.tokens.data() + at, n), true);
        all.insert(all.end(), l.begin(), l.end());
        at += n;
    }
    for (std::size_t i = std::size_t(r.prompt); i < r.tokens.size(); ++i) {
        if (rec) rec->begin(seq, Phase::decode);
        const auto l = g.forward(st, std::span<const std::int32_t>(&r.tokens[i], 1), false);
        all.insert(all.end(), l.begin(), l.end());
    }
    return all;
}

struct Agreement {
    long long id_mismatches = 0;  // at clean positions
    double weight_diff = 0;       // largest |difference| / scale, at clean positions
    long long bad_records = 0;    // a token, phase, sequence or layer list not as run
    long long missing = 0;        // (sequence, position) run but not recorded, or recorded twice
    long long compared = 0, clean = 0, total = 0;
};

// The trace's tokens against the references, by sequence id.
Agreement agree(const aff::trace::RouteTrace& t, const std::map<std::uint32_t, const Reference*>& refs, double scale) {
    Agreement a;
    std::map<std::pair<std::uint32_t, std::uint32_t>, int> seen;
    const std::uint32_t K = t.header.top_k;
    for (const auto& step : t.steps) {
        bool layers_ok = step.layers.size() == t.header.layers;
        for (std::size_t b = 0; layers_ok && b < step.layers.size(); ++b) layers_ok = step.layers[b] == b;
        if (!layers_ok) {
            ++a.bad_records;
            continue;
        }
        for (std::size_t i = 0; i < step.n(); ++i) {
            const aff::trace::TraceToken& tk = step.tokens[i];
            const auto it = refs.find(tk.sequence);
            if (it == refs.end() || tk.position >= it->second->tokens.size()) {
                ++a.bad_records;
                continue;
            }
            const Reference& r = *it->second;
            ++seen[{tk.sequence, tk.position}];
            const Phase want = int(tk.position) < r.prompt ? Phase::prefill : Phase::decode;
            if (tk.token != std::uint32_t(r.tokens[tk.position]) || tk.phase != want) ++a.bad_records;
            if (int(tk.position) >= r.clean) continue;
            for (std::size_t b = 0; b < step.layers.size(); ++b) {
                const auto sel = step.selection(b, i, K);
                for (std::uint32_t j = 0; j < K; ++j) {
                    ++a.compared;
                    a.id_mismatches += int(sel[j]) != r.ids[tk.position][b * K + j];
                    const float w = step.weights[(b * step.n() + i) * K + j];
                    a.weight_diff = std::max(a.weight_diff, std::fabs(double(w) - r.weights[tk.position][b * K + j]) / scale);
                }
            }
        }
    }
    for (const auto& [seq, r] : refs) {
        a.total += std::int64_t(r->tokens.size());
        a.clean += r->clean;
        for (std::size_t p = 0; p < r->tokens.size(); ++p) {
            const auto it = seen.find({seq, std::uint32_t(p)});
            a.missing += it == seen.end() || it->second != 1;
        }
    }
    return a;
}

void add_agreement(std::vector<Row>& rows, const std::string& what, const Agreement& a) {
    std::printf("route_trace: %s: %lld ids compared, %lld of %lld positions clean\n", what.c_str(), a.compared, a.clean,
                a.total);
    add(rows, "route_trace", what + ": ids differing from the CPU's", double(a.id_mismatches), 0.0);
    add(rows, "route_trace", what + ": weights, max |diff| / scale", a.weight_diff, kWeightTolerance);
    add(rows, "route_trace", what + ": records not as run", double(a.bad_records), 0.0);
    add(rows, "route_trace", what + ": positions not recorded once", double(a.missing), 0.0);
    // As forward_compare: a near-tie-free prefix of at least half the positions (1 = shorter).
    add(rows, "route_trace", what + ": clean positions under half", a.compared > 0 && 2 * a.clean >= a.total ? 0.0 : 1.0, 0.0);
}

// What holds of any router's trace: ids in range and distinct per token, hash layers' ids the
// tid2eid rows of the tokens, weights summing to the scale.
double invariant_breaks(const aff::trace::RouteTrace& t, const aff::Model& cpu) {
    const aff::ModelConfig& c = cpu.config();
    const std::uint32_t K = t.header.top_k;
    double bad = 0;
    for (const auto& step : t.steps)
        for (std::size_t b = 0; b < step.layers.size(); ++b) {
            const int l = step.layers[b];
            for (std::size_t i = 0; i < step.n(); ++i) {
                const auto sel = step.selection(b, i, K);
                double sum = 0;
                for (std::uint32_t j = 0; j < K; ++j) {
                    bad += sel[j] >= t.header.experts;
                    for (std::uint32_t q = 0; q < j; ++q) bad += sel[q] == sel[j];
                    if (c.hash_routed[l])
                        bad += int(sel[j]) != cpu.weights().layers[l].ffn.tid2eid[std::size_t(step.tokens[i].token) * K + j];
                    sum += step.weights[(b * step.n() + i) * K + j];
                }
                bad += std::fabs(sum - c.routed_scaling_factor) > 1e-4 * c.routed_scaling_factor;
            }
        }
    return bad;
}

void on_fixture(const std::string& name, const aff::Model& cpu, const aff::TensorReader* weights, const TempDir& tmp,
                const std::string& model_path, std::vector<Row>& rows) {
    const aff::ModelConfig& c = cpu.config();
    const aff::trace::TraceHeader header = aff::trace::trace_header_for(c, model_path);
    const double scale = c.routed_scaling_factor;
    const Reference ref = pick_reference(cpu, name, kPrompt, kDecode);
    const std::map<std::uint32_t, const Reference*> refs{{0u, &ref}};
    {
        aff::gpu::GpuOptions o;
        o.exact = true;
        aff::gpu::GpuModel g(cpu, weights, o);
        for (const auto& [label, chunks] : {std::pair{"whole prompt", std::vector<int>{kPrompt}},
                                            std::pair{"chunks 37+40+3", std::vector<int>{37, 40, 3}}}) {
            const std::string what = name + " exact, " + label + " + decode " + std::to_string(kDecode);
            const std::string path = tmp / (name + "-exact.aft");
            aff::trace::RouteRecorder rec(path, header);
            g.set_route_observer(&rec);
            aff::gpu::GpuDecodeState st = g.new_state();
            run_gpu(g, st, ref, chunks, &rec, 0);
            g.set_route_observer(nullptr);
            rec.publish();
            const aff::trace::RouteTrace t = aff::trace::read_route_trace(path);
            add(rows, "route_trace", what + ": |steps - calls|",
                double(std::llabs(std::int64_t(t.steps.size()) - std::int64_t(chunks.size() + kDecode))), 0.0);
            add_agreement(rows, what, agree(t, refs, scale));
        }
    }
    // Logits with and without the recorder, on the default and the exact path: the same state
    // run again from position 0 (a state's other bytes are never read there), so the second
    // and third runs replay the first's graphs.
    for (const bool exact : {false, true}) {
        const std::string what = name + (exact ? " exact" : " default path") + ", with/without recording";
        aff::gpu::GpuOptions o;
        o.exact = exact;
        aff::gpu::GpuModel g(cpu, weights, o);
        aff::gpu::GpuDecodeState st = g.new_state();
        const std::vector<int> chunks{37, 40, 3};
        const std::vector<float> plain = run_gpu(g, st, ref, chunks, nullptr, 0);
        const std::size_t graphs = g.graphs_captured();
        auto again = [&] {  // from position 0 on the same buffers (graphs are keyed by them)
            st.position = 0;
            if (!st.attention.layers.empty()) st.attention = cpu.new_state();  // attention on the CPU
        };
        const std::string path = tmp / (name + "-logits.aft");
        aff::trace::RouteRecorder rec(path, header);
        g.set_route_observer(&rec);
        again();
        const std::vector<float> recorded = run_gpu(g, st, ref, chunks, &rec, 0);
        g.set_route_observer(nullptr);
        again();
        const std::vector<float> after = run_gpu(g, st, ref, chunks, nullptr, 0);
        rec.publish();
        add(rows, "route_trace", what + ": floats differing", double(differing(plain, recorded) + differing(plain, after)), 0.0);
        add(rows, "route_trace", what + ": graphs captured while recording", double(g.graphs_captured() - graphs), 0.0);
        const aff::trace::RouteTrace t = aff::trace::read_route_trace(path);
        add(rows, "route_trace", what + ": invariants broken (ids, hash rows, weight sums)", invariant_breaks(t, cpu), 0.0);
        Agreement a = agree(t, refs, scale);
        add(rows, "route_trace", what + ": records not as run + positions not once", double(a.bad_records + a.missing), 0.0);
    }
    // Three sequences decoded together, prompts of 11, 23 and 70 tokens.
    {
        const std::string what = name + " exact, batch of 3 (prompts 11, 23, 70) + decode 6";
        std::vector<Reference> batch;
        for (const int p : {11, 23, 70}) batch.push_back(pick_reference(cpu, name + " batch " + std::to_string(p), p, 6));
        aff::gpu::GpuOptions o;
        o.exact = true;
        aff::gpu::GpuModel g(cpu, weights, o);
        const std::string path = tmp / (name + "-batch.aft");
        aff::trace::RouteRecorder rec(path, header);
        g.set_route_observer(&rec);
        std::vector<aff::gpu::GpuDecodeState> states;
        std::vector<aff::gpu::GpuDecodeState*> ptrs;
        const std::uint32_t ids[3] = {100, 101, 102};
        for (int i = 0; i < 3; ++i) states.push_back(g.new_state());
        for (int i = 0; i < 3; ++i) {
            ptrs.push_back(&states[i]);
            rec.begin(ids[i], Phase::prefill);
            g.forward(states[i], std::span<const std::int32_t>(batch[i].tokens.data(), batch[i].prompt), false);
        }
        for (int step = 0; step < 6; ++step) {
            std::vector<std::int32_t> toks(3);
            for (int i = 0; i < 3; ++i) toks[i] = batch[i].tokens[std::size_t(batch[i].prompt + step)];
            rec.begin(ids, Phase::decode);
            g.decode(ptrs, toks);
        }
        g.set_route_observer(nullptr);
        rec.publish();
        const aff::trace::RouteTrace t = aff::trace::read_route_trace(path);
        long long shape = std::llabs(std::int64_t(t.steps.size()) - (3 + 6 * 3));
        for (std::size_t s = 3; s < t.steps.size(); ++s)  // decode: one token each, sequences in turn
            shape += t.steps[s].n() != 1 || t.steps[s].tokens[0].sequence != ids[(s - 3) % 3];
        add(rows, "route_trace", what + ": |steps - 21| + decode steps not one token of the next sequence", double(shape), 0.0);
        std::map<std::uint32_t, const Reference*> by_id;
        for (int i = 0; i < 3; ++i) by_id[ids[i]] = &batch[i];
        add_agreement(rows, what, agree(t, by_id, scale));
    }
}

// The tiered model's trace and logits against the all-resident model's (the wide TQ2875 container).
void tiered(const std::string& path, const TempDir& tmp, std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    auto cpu = aff::Model::load(path, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
    const aff::trace::TraceHeader header = aff::trace::trace_header_for(cpu->config(), path);
    Reference ref;  // only the tokens: the two GPU runs are compared with each other
    ref.prompt = kPrompt;
    ref.tokens = random_tokens(kPrompt + kDecode, cpu->config().vocab_size);
    const std::vector<int> chunks{kPrompt};
    auto record = [&](const aff::gpu::GpuOptions& o, const std::string& file, std::vector<float>& logits,
                      aff::gpu::GpuTierReport& report) {
        aff::gpu::GpuModel g(*cpu, &reader, o);
        aff::trace::RouteRecorder rec(tmp / file, header);
        g.set_route_observer(&rec);
        aff::gpu::GpuDecodeState st = g.new_state();
        logits = run_gpu(g, st, ref, chunks, &rec, 0);
        rec.publish();
        report = g.tiers();
        return aff::trace::read_route_trace(tmp / file);
    };
    std::vector<float> want, got;
    aff::gpu::GpuTierReport resident, tiers;
    const aff::trace::RouteTrace a = record({}, "resident.aft", want, resident);
    std::size_t slot = 0;
    {
        aff::gpu::GpuModel g(*cpu, &reader, {});
        slot = (g.expert_extent(0, 0).bytes + 255) / 256 * 256;
    }
    aff::gpu::GpuOptions o;
    const std::int64_t experts = std::int64_t(cpu->config().num_layers) * cpu->config().n_routed_experts;
    o.tiers.slab_cap = std::size_t(experts / 2) * slot;
    o.tiers.strategy = "demand";  // moves on every miss (tiers_test: it moves at this size)
    const aff::trace::RouteTrace b = record(o, "tiered.aft", got, tiers);
    const std::string what = "wide TQ2875, half the experts in the slab (demand)";
    add(rows, "route_trace", what + ": tiered (1 = no)", tiers.tiered ? 0.0 : 1.0, 0.0);
    add(rows, "route_trace", what + ": logits floats differing from all resident", double(differing(got, want)), 0.0);
    long long differ = a.steps.size() != b.steps.size();
    for (std::size_t s = 0; !differ && s < a.steps.size(); ++s) {
        const auto &x = a.steps[s], &y = b.steps[s];
        differ += x.experts != y.experts || x.layers != y.layers || x.n() != y.n();
        differ += std::memcmp(x.weights.data(), y.weights.data(), std::min(x.weights.size(), y.weights.size()) * 4) != 0;
    }
    add(rows, "route_trace", what + ": steps differing from the all-resident trace", double(differ), 0.0);
    add(rows, "route_trace", what + ": |tokens the mover saw - tokens run| (an 80-token prompt)",
        double(std::llabs(std::int64_t(tiers.tokens) - std::int64_t(ref.tokens.size()))), 0.0);
    add(rows, "route_trace", what + ": moves (0 = none)", tiers.moves > 0 ? 0.0 : 1.0, 0.0);
}

}  // namespace

AFF_DEVICE_TEST("route_trace") {
    TempDir tmp("route_trace");
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c", "tiny-trained"}) {
        try {
            const std::string dir = test_data() + "/models/" + name;
            auto cpu = aff::Model::load(dir, pool);
            const aff::Checkpoint ck(dir);
            on_fixture(name, *cpu, &ck, tmp, dir, rows);
        } catch (const std::exception& e) {
            rows.push_back({"route_trace", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
    try {
        const std::string ck = tmp / "wide";
        write_wide_checkpoint(ck);
        const std::string path = tmp / "wide.aff";
        quantize_checkpoint_to(ck, path, aff::quant::Rotation::off, pool);
        tiered(path, tmp, rows);
    } catch (const std::exception& e) {
        rows.push_back({"route_trace", std::string("wide container threw: ") + e.what(), INFINITY, 0.0, false});
    }
    // No router runs with the routed experts skipped: an observer is refused.
    try {
        const std::string dir = test_data() + "/models/tiny-a";
        auto cpu = aff::Model::load(dir, pool);
        const aff::Checkpoint ck(dir);
        aff::gpu::GpuOptions o;
        o.forward.no_routed_experts = true;
        aff::gpu::GpuModel g(*cpu, &ck, o);
        struct None final : aff::RouteObserver {
            void on_route(const aff::RouteEvent&) override {}
            void on_forward_end() override {}
        } none;
        double refused = 1.0;
        try {
            g.set_route_observer(&none);
        } catch (const aff::Error& e) {
            refused = e.kind() == aff::ErrorKind::unsupported ? 0.0 : 1.0;
        }
        add(rows, "route_trace", "tiny-a, no routed experts: an observer is unsupported", refused, 0.0);
    } catch (const std::exception& e) {
        rows.push_back({"route_trace", std::string("no routed experts threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
