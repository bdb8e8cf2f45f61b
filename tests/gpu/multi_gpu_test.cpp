// Device test of the layer split (GpuOptions::devices, --gpus N; libaff/gpu/forward.hpp): a
// model split across parts gives the one-device model's logits bit for bit, since each layer
// runs the same launches on the same inputs and only the residual stream moves between parts.
// Compared on every tiny fixture and the TQ2875-expert model of forward_test.cpp: prefill of
// 9 tokens (the prefill GEMMs) and of 3 (the GEMVs, the fused mHC sites: an expand pending
// across the hand-over), 20 greedy decode steps at batch 1 and at batch 4 (captured graphs),
// then a 6-token chunk after them. Splits: two parts on GPU 0 (forced uneven, and planned),
// three parts on GPU 0, so one GPU covers the split logic; with a second visible GPU also
// GPU 0 + GPU 1 (forced and planned) and GPU 1 + GPU 0 (peer copies both ways); with one
// GPU those rows print SKIP and are not run. Also: set_max_layers stopping inside the first
// part, describe() naming the split, decode_read_bytes unchanged, a prefix snapshot of a split
// state restored and continued, and a cap too small for the split naming the MiB missing.
// Rows count differing floats (bound 0).
#include "device_test.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/forward.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

std::unique_ptr<aff::Model> make_codebook_test_model(aff::ThreadPool& pool);  // forward_test.cpp

using namespace aff::gpu::test;

namespace {

constexpr int kSteps = 20;

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

struct Split {
    std::vector<int> devices, layers;  // layers empty: planned
};

std::string split_name(const Split& s) {
    std::string out;
    for (std::size_t i = 0; i < s.devices.size(); ++i)
        out += (i ? "+" : "") + std::string("GPU ") + std::to_string(s.devices[i]) +
               (s.layers.empty() ? "" : ":" + std::to_string(s.layers[i]));
    return out + (s.layers.empty() ? " planned" : "");
}

// Every comparison of one split against the one-device model `ref` (fresh states on both).
void compare(const std::string& name, const aff::Model& cpu, const aff::Checkpoint* ck, aff::gpu::GpuModel& ref,
             const Split& split, const aff::gpu::GpuOptions& base, std::vector<Row>& rows) {
    aff::gpu::GpuOptions o = base;
    o.devices = split.devices;
    o.layers_per_device = split.layers;
    aff::gpu::GpuModel g(cpu, ck, o);
    const int V = cpu.config().vocab_size;
    const std::string what = name + ", " + split_name(split);
    std::printf("multi_gpu: %s: %s\n", what.c_str(), g.describe().c_str());
    const auto ranges = g.layer_split();
    bool described = ranges.size() == split.devices.size();
    for (std::size_t i = 0; described && i < ranges.size(); ++i) {
        const std::string part = "layers " + std::to_string(ranges[i].first) + "-" + std::to_string(ranges[i].second - 1) +
                                 " on GPU " + std::to_string(split.devices[i]);
        described = g.describe().find(part) != std::string::npos && ranges[i].second > ranges[i].first &&
                    (!split.layers.empty() ? ranges[i].second - ranges[i].first == split.layers[i] : true);
    }
    add(rows, "multi_gpu", what + ": layer_split and describe() as asked", described ? 0.0 : 1.0, 0.0);
    add(rows, "multi_gpu", what + ": decode_read_bytes(4) differs by",
        std::fabs(double(g.decode_read_bytes(4)) - double(ref.decode_read_bytes(4))), 0.0);

    // Prefill through the GEMMs (9 tokens) and the GEMVs with fused sites (3), every row's logits.
    long long prefill = 0;
    for (int n : {9, 3}) {
        const std::vector<std::int32_t> prompt = random_tokens(n, V);
        aff::gpu::GpuDecodeState a = ref.new_state(), b = g.new_state();
        prefill += differing(ref.forward(a, prompt, true), g.forward(b, prompt, true));
    }
    add(rows, "multi_gpu", what + ": prefill 9 and 3 tokens, floats differing", double(prefill), 0.0);

    // Batch 1: greedy steps, then a chunk.
    {
        aff::gpu::GpuDecodeState a = ref.new_state(), b = g.new_state();
        const std::vector<std::int32_t> prompt = random_tokens(7, V);
        std::vector<float> la = ref.forward(a, prompt, false), lb = g.forward(b, prompt, false);
        long long steps = differing(la, lb);
        for (int s = 0; s < kSteps; ++s) {
            const std::int32_t next[1] = {argmax(la.data(), V)};
            la = ref.forward(a, next, false);
            lb = g.forward(b, next, false);
            steps += differing(la, lb);
        }
        add(rows, "multi_gpu", what + ": " + std::to_string(kSteps) + " decode steps at batch 1, floats differing",
            double(steps), 0.0);
        const std::vector<std::int32_t> chunk = random_tokens(6, V);
        add(rows, "multi_gpu", what + ": 6-token forward after the steps, floats differing",
            double(differing(ref.forward(a, chunk, true), g.forward(b, chunk, true))), 0.0);
        // A prefix snapshot of the split state (every part's buffer), restored into a fresh
        // state, continues as the original: 3 steps each, the same logits.
        const aff::gpu::GpuStateSnapshot snap = g.snapshot(b);
        aff::gpu::GpuDecodeState c = g.new_state();
        g.restore(c, snap);
        long long restored = c.position == b.position ? 0 : 1;
        for (int s = 0; s < 3; ++s) {
            const std::int32_t next[1] = {chunk[s]};
            restored += differing(g.forward(b, next, false), g.forward(c, next, false));
        }
        add(rows, "multi_gpu", what + ": snapshot restored vs original, 3 steps, floats differing", double(restored),
            0.0);
    }

    // Batch 4: prompts of different lengths, one decode call a step on each model.
    {
        constexpr int B = 4;
        std::vector<aff::gpu::GpuDecodeState> sa, sb;
        std::vector<std::int32_t> next(B);
        long long diff = 0;
        for (int i = 0; i < B; ++i) {
            const std::vector<std::int32_t> prompt = random_tokens(4 + 3 * i, V);
            sa.push_back(ref.new_state());
            sb.push_back(g.new_state());
            const std::vector<float> la = ref.forward(sa.back(), prompt, false);
            diff += differing(la, g.forward(sb.back(), prompt, false));
            next[i] = argmax(la.data(), V);
        }
        std::vector<aff::gpu::GpuDecodeState*> pa, pb;
        for (int i = 0; i < B; ++i) {
            pa.push_back(&sa[i]);
            pb.push_back(&sb[i]);
        }
        for (int s = 0; s < kSteps; ++s) {
            const std::vector<float> la = ref.decode(pa, next), lb = g.decode(pb, next);
            diff += differing(la, lb);
            for (int i = 0; i < B; ++i) next[i] = argmax(la.data() + std::size_t(i) * V, V);
        }
        add(rows, "multi_gpu", what + ": " + std::to_string(kSteps) + " decode steps at batch 4, floats differing",
            double(diff), 0.0);
    }
}

void check(const std::string& name, const aff::Model& cpu, const aff::Checkpoint* ck, const aff::gpu::GpuOptions& base,
           std::vector<Row>& rows) {
    const int L = cpu.config().num_layers;
    try {
        aff::gpu::GpuModel ref(cpu, ck, base);
        std::vector<Split> splits = {{{0, 0}, {1, L - 1}}, {{0, 0}, {}}};
        if (L >= 3) splits.push_back({{0, 0, 0}, {1, 1, L - 2}});
        if (aff::gpu::device_count() >= 2) {
            splits.push_back({{0, 1}, {L - 1, 1}});
            splits.push_back({{0, 1}, {}});
            splits.push_back({{1, 0}, {1, L - 1}});
        } else {
            std::printf("multi_gpu: %s: SKIP GPU 0 + GPU 1 splits: %d GPU visible (the splits on GPU 0 alone ran)\n",
                        name.c_str(), aff::gpu::device_count());
        }
        for (const Split& s : splits) compare(name, cpu, ck, ref, s, base, rows);
    } catch (const std::exception& e) {
        rows.push_back({"multi_gpu", name + " threw: " + e.what(), INFINITY, 0.0, false});
    }
}

}  // namespace

AFF_DEVICE_TEST("multi_gpu") {
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c"}) {
        const std::string dir = test_data() + "/models/" + name;
        auto cpu = aff::Model::load(dir, pool);
        const aff::Checkpoint ck(dir);
        check(name, *cpu, &ck, {}, rows);
        if (std::string(name) == "tiny-b") {  // attention on the CPU: the block's state stays the CPU's
            aff::gpu::GpuOptions o;
            o.cpu_attention = true;
            check(std::string(name) + ", CPU attention", *cpu, &ck, o, rows);
        }
    }
    auto quantised = make_codebook_test_model(pool);
    check("synthetic D=I=1024, TQ2875 experts", *quantised, nullptr, {}, rows);

    const std::string dir = test_data() + "/models/tiny-a";
    auto cpu = aff::Model::load(dir, pool);
    // set_max_layers stopping inside the first part: the second runs no layer, only the head.
    try {
        aff::gpu::GpuOptions o;
        aff::gpu::GpuModel ref(*cpu, nullptr, o);
        o.devices = {0, 0};
        o.layers_per_device = {3, 3};
        aff::gpu::GpuModel g(*cpu, nullptr, o);
        long long diff = 0;
        for (int layers : {2, 4, 0}) {
            ref.set_max_layers(layers);
            g.set_max_layers(layers);
            const std::vector<std::int32_t> prompt = random_tokens(6, cpu->config().vocab_size);
            aff::gpu::GpuDecodeState a = ref.new_state(), b = g.new_state();
            diff += differing(ref.forward(a, prompt, true), g.forward(b, prompt, true));
            const std::int32_t one[1] = {prompt[0]};
            diff += differing(ref.forward(a, one, false), g.forward(b, one, false));
        }
        add(rows, "multi_gpu", "tiny-a, GPU 0:3+GPU 0:3, set_max_layers 2, 4, 0: floats differing", double(diff), 0.0);
    } catch (const std::exception& e) {
        rows.push_back({"multi_gpu", std::string("tiny-a set_max_layers threw: ") + e.what(), INFINITY, 0.0, false});
    }
    // A cap no part fits under: one device error naming the MiB missing.
    double missing = 1.0;
    try {
        aff::gpu::GpuOptions o;
        o.devices = {0, 0};
        o.memory_cap_bytes = 1 << 10;
        aff::gpu::GpuModel g(*cpu, nullptr, o);
    } catch (const aff::Error& e) {
        const std::string m = e.what();
        std::printf("multi_gpu: tiny-a on GPU 0 + GPU 0 with a 1 KiB cap: %s\n", m.c_str());
        if (e.kind() == aff::ErrorKind::device && m.find("MiB missing") != std::string::npos &&
            m.find("on 2 GPUs") != std::string::npos)
            missing = 0.0;
    }
    add(rows, "multi_gpu", "a cap below the split model's size names the MiB missing", missing, 0.0);
}
