// Compressor kernels (declarations, layouts and contract in compressor.hpp). Emit: one block
// per completed window, a thread per channel gathers the window's slots (from the chunk's
// projections, or from the pending/previous state for tokens of earlier calls), then the
// block normalises and rotates the entry. Advance: a thread per state element; each thread
// reads the old pending value it needs for the previous-window copy before overwriting the
// same element, so no element is read after another thread wrote it. Both kernels take a list
// of steps (grid y), each with its own state and sizes: one launch pair for every sequence of
// a decode batch and both compressors of a CSA layer.
#include "kernels/compressor.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxDim = 512;

struct Steps {
    CompressorArgs step[kCompressorMaxBatch];
    int count = 0;
};


// Slot i of window `win`, channel c of the full-width row: kv value and gate logit (ape added).
__device__ inline void window_slot(const CompressorArgs& a, long long win, int i, int c, int width, float& kv,
                                   float& gate) {
    const long long pos = win * a.ratio + i;
    if (pos >= a.start) {
        const size_t at = static_cast<size_t>(pos - a.start) * width + c;
        kv = a.kv[at];
        gate = a.gate[at] + a.ape[static_cast<size_t>(i) * width + c];
    } else {
        kv = a.pending_kv[static_cast<size_t>(i) * width + c];
        gate = a.pending_gate[static_cast<size_t>(i) * width + c];
    }
}

// Ca of window `win` (its slot i, channel d < dim) as the CSA softmax of window win+1 reads it:
// from this chunk, from the pending state (a window that completes in this chunk), or from
// the previous-window state (completed before this chunk).
__device__ inline void previous_slot(const CompressorArgs& a, long long win, int i, int d, int width, float& kv,
                                     float& gate) {
    const long long first_window = a.start / a.ratio;
    if (win >= first_window) {
        window_slot(a, win, i, d, width, kv, gate);
    } else {
        kv = a.prev_kv[static_cast<size_t>(i) * a.dim + d];
        gate = a.prev_gate[static_cast<size_t>(i) * a.dim + d];
    }
}

__global__ void __launch_bounds__(kThreads) compressor_emit_kernel(Steps steps) {
    __shared__ float entry[kMaxDim];
    __shared__ float red[kThreads / kWarp];
    CompressorArgs a = dev::pick(steps.step, static_cast<int>(dev::block_y()));
    if (a.start_at) a.start = *a.start_at;
    const long long win = a.start / a.ratio + dev::block_x();
    if (win >= (a.start + a.n) / a.ratio) return;  // start_at: more blocks than windows
    const int width = a.overlap ? 2 * a.dim : a.dim;
    const int r = a.ratio;
    const bool with_prev = a.overlap && win > 0;
    float ss = 0.0f;
    for (int d = static_cast<int>(dev::thread_x()); d < a.dim; d += kThreads) {
        const int cur = a.overlap ? a.dim + d : d;  // CSA: Cb is the second half of the row
        float m = -__builtin_huge_valf(), kv, g;
        if (with_prev)
            for (int i = 0; i < r; ++i) {
                previous_slot(a, win - 1, i, d, width, kv, g);
                m = fmaxf(m, g);
            }
        for (int i = 0; i < r; ++i) {
            window_slot(a, win, i, cur, width, kv, g);
            m = fmaxf(m, g);
        }
        float denom = 0.0f;
        if (with_prev)
            for (int i = 0; i < r; ++i) {
                previous_slot(a, win - 1, i, d, width, kv, g);
                denom += expf(g - m);
            }
        for (int i = 0; i < r; ++i) {
            window_slot(a, win, i, cur, width, kv, g);
            denom += expf(g - m);
        }
        float acc = 0.0f;
        if (with_prev)
            for (int i = 0; i < r; ++i) {
                previous_slot(a, win - 1, i, d, width, kv, g);
                acc += expf(g - m) / denom * kv;
            }
        for (int i = 0; i < r; ++i) {
            window_slot(a, win, i, cur, width, kv, g);
            acc += expf(g - m) / denom * kv;
        }
        entry[d] = acc;
        ss += acc * acc;
    }
    ss = dev::block_sum<kThreads>(ss, red);  // ends with a barrier: entry[] is complete
    const float scale = 1.0f / sqrtf(ss / a.dim + a.eps);
    for (int d = static_cast<int>(dev::thread_x()); d < a.dim; d += kThreads) entry[d] = a.norm[d] * (entry[d] * scale);
    dev::sync_block();
    const int pairs = a.rope_dim / 2, offset = a.dim - a.rope_dim;
    const float pos = static_cast<float>(win * r);
    for (int j = static_cast<int>(dev::thread_x()); j < pairs; j += kThreads) {
        const float angle = a.inv_freq[j] * pos;  // fp32 angle, fp64 sine and cosine: as the CPU
        double sd, cd;
        sincos(static_cast<double>(angle), &sd, &cd);
        const float c = static_cast<float>(cd), s = static_cast<float>(sd);
        const float e = entry[offset + 2 * j], o = entry[offset + 2 * j + 1];
        entry[offset + 2 * j] = e * c - o * s;
        entry[offset + 2 * j + 1] = o * c + e * s;
    }
    dev::sync_block();
    float* out = a.entries + static_cast<size_t>(win) * a.dim;
    for (int d = static_cast<int>(dev::thread_x()); d < a.dim; d += kThreads) out[d] = entry[d];
}

__global__ void __launch_bounds__(kThreads) compressor_advance_kernel(Steps steps) {
    CompressorArgs a = dev::pick(steps.step, static_cast<int>(dev::block_y()));
    if (a.start_at) a.start = *a.start_at;
    const int width = a.overlap ? 2 * a.dim : a.dim;
    const int idx = static_cast<int>(dev::block_x()) * kThreads + static_cast<int>(dev::thread_x());
    if (idx >= a.ratio * width) return;
    const int i = idx / width, c = idx % width;
    const long long end = a.start + a.n;
    const long long last = end / a.ratio - 1;  // last window completed by this chunk, if ≥ start / ratio
    if (a.overlap && c < a.dim && last >= a.start / a.ratio) {
        float kv, g;
        window_slot(a, last, i, c, width, kv, g);  // reads pending[i][c] before it is replaced below
        a.prev_kv[static_cast<size_t>(i) * a.dim + c] = kv;
        a.prev_gate[static_cast<size_t>(i) * a.dim + c] = g;
    }
    const long long base = end / a.ratio * a.ratio;
    const long long pos = base + i;
    if (pos < end && pos >= a.start) {
        const size_t at = static_cast<size_t>(pos - a.start) * width + c;
        a.pending_kv[static_cast<size_t>(i) * width + c] = a.kv[at];
        a.pending_gate[static_cast<size_t>(i) * width + c] = a.gate[at] + a.ape[static_cast<size_t>(i) * width + c];
    }
}

}  // namespace

namespace {
void check_step(const CompressorArgs& a) {
    if (a.n < 0 || a.start < 0 || a.ratio <= 0) throw_argument("compressor", "n, start must be >= 0 and ratio > 0");
    if (a.dim <= 0 || a.dim > kMaxDim) throw_argument("compressor", "dim must be in 1..512");
    if (a.rope_dim < 0 || a.rope_dim % 2 != 0 || a.rope_dim > a.dim) throw_argument("compressor", "rope_dim must be even and <= dim");
    if (a.overlap && (!a.prev_kv || !a.prev_gate)) throw_argument("compressor", "CSA (overlap) needs the previous-window state");
}
}  // namespace

void compressor_batch(const CompressorArgs* list, int count, void* stream) {
    if (count < 0 || count > kCompressorMaxBatch) throw_argument("compressor", "0 to 8 steps a launch");
    Steps steps;
    long long windows = 0, blocks = 0;
    for (int i = 0; i < count; ++i) {
        const CompressorArgs& a = list[i];
        check_step(a);
        if (a.n == 0) continue;
        // With start_at the windows depend on the start read on the device: enough blocks for any.
        const long long w = a.start_at ? a.n / a.ratio + 1
                                       : compressor_end_entry(a.start, a.n, a.ratio) - compressor_first_entry(a.start, a.ratio);
        const int width = a.overlap ? 2 * a.dim : a.dim;
        windows = w > windows ? w : windows;
        const long long b = (static_cast<long long>(a.ratio) * width + kThreads - 1) / kThreads;
        blocks = b > blocks ? b : blocks;
        steps.step[steps.count++] = a;
    }
    if (steps.count == 0) return;
    for (int i = steps.count; i < kCompressorMaxBatch; ++i) steps.step[i] = CompressorArgs{};
    const hipStream_t s = static_cast<hipStream_t>(stream);
    const unsigned y = static_cast<unsigned>(steps.count);
    if (windows > 0) {
        compressor_emit_kernel<<<dim3(static_cast<unsigned>(windows), y), dim3(kThreads), 0, s>>>(steps);
        AFF_GPU_CHECK(hipGetLastError());
    }
    compressor_advance_kernel<<<dim3(static_cast<unsigned>(blocks), y), dim3(kThreads), 0, s>>>(steps);
    AFF_GPU_CHECK(hipGetLastError());
}

void compressor(const CompressorArgs& a, void* stream) { compressor_batch(&a, 1, stream); }

}  // namespace aff::gpu
