// Device test: kernels/compressor.hip against the CPU forward's own compressor step
// (aff::compress_tokens in libaff/model/attention_ops), carrying the state through a run of
// chunks (decode tokens, chunks that complete several windows, chunks that complete none), for
// CSA (overlap, ratio 4) and HCA (ratio 16 tiny / 128 flash) at entry width 128 (tiny, and the
// indexer's) and 512 (V4-Flash head_dim), starting at position 0 and mid-sequence from a random
// state. Compares every entry row and the pending / previous-window state after each chunk.
// compressor_batch: 8 such runs at once, one token a step, half with the position on the device.
#include "device_test.hpp"

#include "libaff/gpu/kernel_cases.hpp"
#include "libaff/model/attention_ops.hpp"
#include "libaff/model/forward.hpp"
#include "kernels/compressor.hpp"

#include <optional>

using namespace aff::gpu::test;

namespace {

struct Case {
    const char* name;
    int dim, ratio;
    bool overlap;
    std::int64_t start;
};

std::vector<float> rows_of(const std::vector<float>& v, int rows, int stride, int cols) {
    std::vector<float> out;
    for (int r = 0; r < rows; ++r)
        out.insert(out.end(), v.begin() + static_cast<size_t>(r) * stride, v.begin() + static_cast<size_t>(r) * stride + cols);
    return out;
}

// One compressor run: the CPU state and its device copy, carried through a list of chunks.
struct Run {
    Case c;
    int r = 0, dim = 0, width = 0, rope_dim = 64;
    std::vector<float> inv_freq, ape, norm;
    aff::CompressorState st;
    std::optional<aff::gpu::CompressorDeviceCase> dev;  // set once the state is drawn
    aff::gpu::Buffer dkv, dgate, dstart;
    std::int64_t pos = 0;
    double worst_entries = 0.0, worst_rel = 0.0, worst_state = 0.0;

    Run(const Case& cs, int total) : c(cs), r(cs.ratio), dim(cs.dim), width(cs.overlap ? 2 * cs.dim : cs.dim) {
        aff::RopeParameters table;  // V4-Flash's compress table: θ 160000, YaRN factor 16
        table.theta = 160000.0;
        table.yarn = true;
        table.factor = 16.0;
        table.original_max_position = 65536.0;
        inv_freq = aff::rope_inv_freq(table, rope_dim);
        ape = normal(static_cast<size_t>(r) * width);
        norm = normal(dim, 1.0f, 0.2f);
        st = aff::gpu::random_compressor_state(rng(), r, dim, c.overlap, c.start);
        dev.emplace(params(), st, c.start, total);
        pos = c.start;
    }

    // Points into this Run's own vectors: build it where it is used.
    aff::CompressorParams params() const { return {r, dim, c.overlap, ape.data(), norm.data(), 1e-6, &inv_freq}; }

    // The CPU step of the next n tokens, and the device step's arguments (not launched).
    // device_start: the position is read from device memory, as in a replayed decode graph.
    aff::gpu::CompressorArgs step(int n, bool device_start) {
        const std::vector<float> kv = normal(static_cast<size_t>(n) * width), gate = normal(static_cast<size_t>(n) * width, 0.0f, 2.0f);
        aff::compress_tokens(params(), st, pos, n, kv.data(), gate.data());
        dkv = to_device(kv);
        dgate = to_device(gate);
        dstart = to_device(std::vector<int32_t>{static_cast<int32_t>(pos)});
        aff::gpu::CompressorArgs a = dev->args(dkv.as<float>(), dgate.as<float>(), n, device_start ? 0 : pos);
        if (device_start) a.start_at = dstart.as<int32_t>();
        pos += n;
        return a;
    }

    // After the device step ran: entries (all, or those this step emitted) and state against the CPU's.
    void compare(int n, bool all_entries) {
        if (st.count != aff::gpu::compressor_end_entry(pos - n, n, r)) throw std::runtime_error("entry count mismatch");
        const size_t from = all_entries ? 0 : static_cast<size_t>(aff::gpu::compressor_first_entry(pos - n, r)) * dim;
        const size_t to = static_cast<size_t>(st.count) * dim;
        if (to > from) {
            std::vector<float> got(to - from);
            aff::gpu::Stream s;
            s.copy(got.data(), dev->entries.as<float>() + from, got.size() * sizeof(float));
            s.synchronize();
            const std::vector<float> want(st.entries.begin() + static_cast<std::ptrdiff_t>(from), st.entries.begin() + static_cast<std::ptrdiff_t>(to));
            worst_entries = std::max(worst_entries, nmse(got, want));
            worst_rel = std::max(worst_rel, max_rel(got, want));
        }
        const int pend = st.pending;
        if (pend > 0) {
            worst_state = std::max(worst_state, nmse(rows_of(to_host<float>(dev->pending_kv, st.pending_kv.size()), pend, width, width),
                                                     rows_of(st.pending_kv, pend, width, width)));
            worst_state = std::max(worst_state, nmse(rows_of(to_host<float>(dev->pending_gate, st.pending_gate.size()), pend, width, width),
                                                     rows_of(st.pending_gate, pend, width, width)));
        }
        if (c.overlap && st.has_prev) {
            worst_state = std::max(worst_state, nmse(to_host<float>(dev->prev_kv, st.prev_kv.size()), st.prev_kv));
            worst_state = std::max(worst_state, nmse(to_host<float>(dev->prev_gate, st.prev_gate.size()), st.prev_gate));
        }
    }

    void report(std::vector<Row>& rows, const std::string& how) const {
        const std::string what = std::string(c.name) + " dim " + std::to_string(dim) + " r " + std::to_string(r) +
                                 (c.overlap ? " csa" : " hca") + " from " + std::to_string(c.start) + " (" +
                                 std::to_string(st.count) + " entries)" + how;
        add(rows, "compressor", what + " nmse", worst_entries, aff::gpu::compressor_max_nmse);
        add(rows, "compressor", what + " max rel", worst_rel, 1e-5);
        add(rows, "compressor", what + " state", worst_state, 0.0);
    }
};

std::vector<int> chunks_for(int r) { return {1, 3, 1, 2 * r + 3, 1, 1, r - 1, 37, 1}; }

void run_case(std::vector<Row>& rows, const Case& c) {
    const std::vector<int> chunks = chunks_for(c.ratio);
    int total = 0;
    for (int n : chunks) total += n;
    Run run(c, total);
    aff::gpu::Stream s;
    for (int n : chunks) {
        aff::gpu::compressor(run.step(n, false), s.handle());
        s.synchronize();
        run.compare(n, true);
    }
    run.report(rows, "");
}

// Every case at once through compressor_batch (each its own state and sizes, as the forward's
// sequences and a CSA layer's two compressors are), single tokens as decode makes them, every
// other case with its position on the device.
void run_batched(std::vector<Row>& rows, const std::vector<Case>& cases) {
    const int steps = 2 * 128 + 5;  // HCA ratio 128: at least two windows complete
    std::vector<Run> runs;
    runs.reserve(cases.size());
    for (const Case& c : cases) runs.emplace_back(c, steps);
    aff::gpu::Stream s;
    for (int i = 0; i < steps; ++i) {
        std::vector<aff::gpu::CompressorArgs> args;
        for (size_t k = 0; k < runs.size(); ++k) args.push_back(runs[k].step(1, k % 2 == 1));
        aff::gpu::compressor_batch(args.data(), static_cast<int>(args.size()), s.handle());
        s.synchronize();
        for (Run& run : runs) run.compare(1, false);
    }
    for (size_t k = 0; k < runs.size(); ++k)
        runs[k].report(rows, std::string(", batch of ") + std::to_string(runs.size()) + ", " + std::to_string(steps) +
                                 " decode steps" + (k % 2 == 1 ? ", start on the device" : ""));
}

}  // namespace

AFF_DEVICE_TEST("compressor") {
    for (const Case c : {Case{"tiny", 128, 4, true, 0}, Case{"tiny", 128, 16, false, 0}, Case{"tiny", 128, 4, true, 45},
                         Case{"tiny", 128, 16, false, 45}, Case{"flash", 512, 4, true, 70001},
                         Case{"flash", 512, 128, false, 70001}, Case{"flash", 512, 128, false, 0},
                         Case{"flash-indexer", 128, 4, true, 70001}})
        run_case(rows, c);
    run_batched(rows, {Case{"tiny", 128, 4, true, 45}, Case{"tiny", 128, 16, false, 45}, Case{"flash", 512, 4, true, 70001},
                       Case{"flash", 512, 128, false, 70001}, Case{"flash-indexer", 128, 4, true, 70001},
                       Case{"flash", 512, 128, false, 3}, Case{"flash-indexer", 128, 4, true, 2},
                       Case{"flash", 512, 4, true, 0}});
}
