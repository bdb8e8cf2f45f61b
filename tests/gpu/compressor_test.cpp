// Device test: kernels/compressor.hip against the CPU forward's own compressor step
// (aff::compress_tokens in libaff/model/attention_ops), carrying the state through a run of
// chunks (decode tokens, chunks that complete several windows, chunks that complete none), for
// CSA (overlap, ratio 4) and HCA (ratio 16 tiny / 128 flash) at entry width 128 (tiny, and the
// indexer's) and 512 (V4-Flash head_dim), starting at position 0 and mid-sequence from a random
// state. Compares every entry row and the pending / previous-window state after each chunk.
// compressor_batch: 8 such runs at once, one token a step, half with the position on the device.
#include "device_test.hpp"

#include "aff/model/attention_ops.hpp"
#include "aff/model/forward.hpp"
#include "kernels/compressor.hpp"

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
    aff::gpu::Buffer dpk, dpg, dvk, dvg, dent, dape, dnorm, dfreq, dkv, dgate, dstart;
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
        // The state after c.start positions: random contents, counters implied by the position.
        st.pending_kv = normal(static_cast<size_t>(r) * width);
        st.pending_gate = normal(static_cast<size_t>(r) * width);
        st.prev_kv = normal(static_cast<size_t>(r) * dim);
        st.prev_gate = normal(static_cast<size_t>(r) * dim);
        st.pending = static_cast<int>(c.start % r);
        st.count = static_cast<int>(c.start / r);
        st.has_prev = st.count > 0;
        st.entries = normal(static_cast<size_t>(st.count) * dim);
        const int capacity = static_cast<int>((c.start + total) / r) + 1;
        std::vector<float> entries_init = st.entries;
        entries_init.resize(static_cast<size_t>(capacity) * dim, 0.0f);
        dpk = to_device(st.pending_kv);
        dpg = to_device(st.pending_gate);
        dvk = to_device(st.prev_kv);
        dvg = to_device(st.prev_gate);
        dent = to_device(entries_init);
        dape = to_device(ape);
        dnorm = to_device(norm);
        dfreq = to_device(inv_freq);
        pos = c.start;
    }

    // The CPU step of the next n tokens, and the device step's arguments (not launched).
    // device_start: the position is read from device memory, as in a replayed decode graph.
    aff::gpu::CompressorArgs step(int n, bool device_start) {
        const aff::CompressorParams params{r, dim, c.overlap, ape.data(), norm.data(), 1e-6, &inv_freq};
        const std::vector<float> kv = normal(static_cast<size_t>(n) * width), gate = normal(static_cast<size_t>(n) * width, 0.0f, 2.0f);
        aff::compress_tokens(params, st, pos, n, kv.data(), gate.data());
        dkv = to_device(kv);
        dgate = to_device(gate);
        dstart = to_device(std::vector<int32_t>{static_cast<int32_t>(pos)});
        aff::gpu::CompressorArgs a;
        a.kv = dkv.as<float>();
        a.gate = dgate.as<float>();
        a.ape = dape.as<float>();
        a.norm = dnorm.as<float>();
        a.inv_freq = dfreq.as<float>();
        a.pending_kv = dpk.as<float>();
        a.pending_gate = dpg.as<float>();
        a.prev_kv = c.overlap ? dvk.as<float>() : nullptr;
        a.prev_gate = c.overlap ? dvg.as<float>() : nullptr;
        a.entries = dent.as<float>();
        a.n = n;
        a.ratio = r;
        a.dim = dim;
        a.rope_dim = rope_dim;
        a.overlap = c.overlap;
        a.eps = 1e-6f;
        a.start = device_start ? 0 : pos;
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
            s.copy(got.data(), dent.as<float>() + from, got.size() * sizeof(float));
            s.synchronize();
            const std::vector<float> want(st.entries.begin() + static_cast<std::ptrdiff_t>(from), st.entries.begin() + static_cast<std::ptrdiff_t>(to));
            worst_entries = std::max(worst_entries, nmse(got, want));
            worst_rel = std::max(worst_rel, max_rel(got, want));
        }
        const int pend = st.pending;
        if (pend > 0) {
            worst_state = std::max(worst_state, nmse(rows_of(to_host<float>(dpk, st.pending_kv.size()), pend, width, width),
                                                     rows_of(st.pending_kv, pend, width, width)));
            worst_state = std::max(worst_state, nmse(rows_of(to_host<float>(dpg, st.pending_gate.size()), pend, width, width),
                                                     rows_of(st.pending_gate, pend, width, width)));
        }
        if (c.overlap && st.has_prev) {
            worst_state = std::max(worst_state, nmse(to_host<float>(dvk, st.prev_kv.size()), st.prev_kv));
            worst_state = std::max(worst_state, nmse(to_host<float>(dvg, st.prev_gate.size()), st.prev_gate));
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
