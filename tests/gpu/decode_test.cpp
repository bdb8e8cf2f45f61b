// Device test of decode (libaff/gpu/forward.hpp, GpuModel::decode) on every tiny fixture and
// on the TQ2875-expert model of forward_test.cpp (moe_gemv with job lists built on the device):
//   graphs: decode steps replayed from a captured graph give logits bit for bit equal to the
//     same launches issued one by one (GpuOptions::graphs = false), over enough steps to
//     cross the compressors' window boundaries; the row counts differing floats (bound 0).
//   batch: 2 to 4 sequences (prompts of different lengths) decoded in one call give each
//     sequence's logits as decoding it alone does: NMSE bound and argmax identical.
// Accuracy against the CPU reference is forward_test.cpp's (its decode steps take this path).
#include "device_test.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/forward.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

std::unique_ptr<aff::Model> make_codebook_test_model(aff::ThreadPool& pool);  // forward_test.cpp

using namespace aff::gpu::test;

namespace {

constexpr int kSteps = 20;                // past two windows of ratio 4 and one of 16
constexpr double kBatchMaxNmse = 1e-12;   // batched GEMVs may sum in another order than batch 1

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// Prompt as one prefill, then kSteps greedy steps, on a model with and one without graphs.
void graphs_match(const std::string& name, const aff::Model& cpu, const aff::Checkpoint* ck, std::vector<Row>& rows) {
    aff::gpu::GpuOptions with, without;
    without.graphs = false;
    aff::gpu::GpuModel g(cpu, ck, with), d(cpu, ck, without);
    const int V = cpu.config().vocab_size;
    const std::vector<std::int32_t> prompt = random_tokens(9, V);
    aff::gpu::GpuDecodeState sg = g.new_state(), sd = d.new_state();
    std::vector<float> lg = g.forward(sg, prompt, false), ld = d.forward(sd, prompt, false);
    long long differ = lg == ld ? 0 : 1;
    for (int step = 0; step < kSteps; ++step) {
        const std::int32_t next[1] = {argmax(ld.data(), V)};
        lg = g.forward(sg, next, false);
        ld = d.forward(sd, next, false);
        if (lg.size() != ld.size()) {
            differ += V;
            continue;
        }
        for (int i = 0; i < V; ++i) differ += std::memcmp(&lg[i], &ld[i], 4) != 0;
    }
    add(rows, "decode", name + ": graph vs launches, floats differing over " + std::to_string(kSteps) + " steps",
        double(differ), 0.0);
}

// B sequences with prompts of different lengths: one batched call a step vs each alone.
void batch_matches(const std::string& name, const aff::Model& cpu, const aff::Checkpoint* ck, int B,
                   std::vector<Row>& rows) {
    aff::gpu::GpuModel g(cpu, ck, {});
    const int V = cpu.config().vocab_size;
    std::vector<aff::gpu::GpuDecodeState> batched, alone;
    std::vector<std::int32_t> next(B);
    for (int i = 0; i < B; ++i) {
        const std::vector<std::int32_t> prompt = random_tokens(5 + 3 * i, V);
        batched.push_back(g.new_state());
        alone.push_back(g.new_state());
        g.forward(batched.back(), prompt, false);
        next[i] = argmax(g.forward(alone.back(), prompt, false).data(), V);
    }
    std::vector<aff::gpu::GpuDecodeState*> ptrs;
    for (auto& s : batched) ptrs.push_back(&s);
    std::vector<float> got, want;
    int mismatches = 0;
    for (int step = 0; step < kSteps; ++step) {
        const std::vector<float> b = g.decode(ptrs, next);
        for (int i = 0; i < B; ++i) {
            const std::int32_t one[1] = {next[i]};
            const std::vector<float> a = g.forward(alone[i], one, false);
            const float* bi = b.data() + std::size_t(i) * V;
            mismatches += argmax(bi, V) != argmax(a.data(), V);
            got.insert(got.end(), bi, bi + V);
            want.insert(want.end(), a.begin(), a.end());
            next[i] = argmax(a.data(), V);
        }
    }
    const std::string what = name + ": batch of " + std::to_string(B) + " vs alone, " + std::to_string(kSteps) + " steps";
    add(rows, "decode", what + ": logits nmse", nmse(got, want), kBatchMaxNmse);
    add(rows, "decode", what + ": argmax mismatches", mismatches, 0.0);
}

void check(const std::string& name, const aff::Model& cpu, const aff::Checkpoint* ck, std::vector<Row>& rows) {
    try {
        graphs_match(name, cpu, ck, rows);
        for (int B : {2, 4}) batch_matches(name, cpu, ck, B, rows);
    } catch (const std::exception& e) {
        rows.push_back({"decode", name + " threw: " + e.what(), INFINITY, 0.0, false});
    }
}

}  // namespace

AFF_DEVICE_TEST("decode") {
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c"}) {
        const std::string dir = test_data() + "/models/" + name;
        auto cpu = aff::Model::load(dir, pool);
        const aff::Checkpoint ck(dir);
        check(name, *cpu, &ck, rows);
    }
    auto quantised = make_codebook_test_model(pool);
    check("synthetic D=I=1024, TQ2875 experts", *quantised, nullptr, rows);
    // A call of more sequences than the GEMVs take is refused with a usage error.
    aff::gpu::GpuModel g(*quantised, nullptr, {});
    std::vector<aff::gpu::GpuDecodeState> st;
    for (int i = 0; i < 5; ++i) st.push_back(g.new_state());
    std::vector<aff::gpu::GpuDecodeState*> ptrs;
    for (auto& s : st) ptrs.push_back(&s);
    const std::vector<std::int32_t> toks(5, 1);
    double refused = 1.0;
    try {
        g.decode(ptrs, toks);
    } catch (const aff::Error& e) {
        refused = e.kind() == aff::ErrorKind::usage ? 0.0 : 1.0;
    }
    add(rows, "decode", "5 sequences in one call: usage error", refused, 0.0);
}
