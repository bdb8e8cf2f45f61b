// mHC kernels (declarations and contract in hc.hpp). The pre step and the hyper head share
// two launches: hc_project_kernel computes the rows of fn · v and Σ v² (one block per row and
// token, so the 24 × 16384 projection spreads over the chip), then a mix kernel turns them
// into pre/post/comb (Sinkhorn with a thread per element of the n×n matrix: 39
// normalisations) and collapses the streams. hc_post_kernel is one thread per (token,
// channel). The fused decode site (hc_site, hc_head_site) is two launches of its own, below.
// The mix and expand kernels are templates on the stream count n (hc_mult), so their small
// arrays stay in registers.
#include "kernels/hc.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"
#include "kernels/gemv_reduce.hpp"

#include <type_traits>

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;

// scratch[t][r] = fn[r] · v_t for r < rows, scratch[t][rows] = Σ v_t², v_t = x[t] flattened.
__global__ void __launch_bounds__(kThreads) hc_project_kernel(const float* __restrict__ x, const float* __restrict__ fn,
                                                              int rows, int width, float* scratch) {
    __shared__ float red[kThreads / kWarp];
    const int r = static_cast<int>(dev::block_x());
    const int t = static_cast<int>(dev::block_y());
    const float4* v = reinterpret_cast<const float4*>(x + static_cast<size_t>(t) * width);
    const float4* f = reinterpret_cast<const float4*>(fn + static_cast<size_t>(r < rows ? r : 0) * width);
    float acc = 0.0f;
    int i = dev::thread_x();
    // Four steps' loads in flight before their sums, added in the same order as one at a time.
    for (; i + 3 * kThreads < width / 4; i += 4 * kThreads) {
        float4 a[4], b[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            a[j] = v[i + j * kThreads];
            b[j] = r < rows ? f[i + j * kThreads] : a[j];
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) acc += a[j].x * b[j].x + a[j].y * b[j].y + a[j].z * b[j].z + a[j].w * b[j].w;
    }
    for (; i < width / 4; i += kThreads) {
        const float4 a = v[i];
        const float4 b = r < rows ? f[i] : a;
        acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    acc = dev::block_sum<kThreads>(acc, red);
    if (dev::thread_x() == 0) scratch[static_cast<size_t>(t) * (rows + 1) + r] = acc;
}

__device__ inline float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// The barrier between Sinkhorn half-steps: the first warp's when it holds every element.
template <int kN>
__device__ inline void sinkhorn_sync() {
    if constexpr (kN * kN <= kWarp) {
        dev::sync_warp();
    } else {
        dev::sync_block();
    }
}

// The mix of one token from z (the rows of fn · v, then Σ v²): pre into `pre`, post and
// comb (after Sinkhorn, a thread per element of the n×n matrix: row and column sums each on
// one thread, in the same order as the CPU) written to device memory. Every thread of the
// block calls it; it ends with a barrier, so `pre` is ready for all of them.
template <int kN>
__device__ inline void mix_weights(const float* z, int t, const float* __restrict__ base,
                                   const float* __restrict__ scale, int dim, int iters, float hc_eps, float norm_eps,
                                   float* post, float* comb, float (&pre)[kN], float (&sm)[kN][kN]) {
    if (dev::thread_x() == 0) {
        constexpr int kRows = (2 + kN) * kN;  // hc_mix_rows(kN), spelled out: device code
        const float inv = 1.0f / sqrtf(z[kRows] / static_cast<float>(kN * dim) + norm_eps);
        for (int k = 0; k < kN; ++k) {
            pre[k] = sigmoid(scale[0] * (z[k] * inv) + base[k]) + hc_eps;
            post[t * kN + k] = 2.0f * sigmoid(scale[1] * (z[kN + k] * inv) + base[kN + k]);
        }
        float m[kN][kN];
        for (int a = 0; a < kN; ++a) {
            float mx = -3.0e38f;
            for (int b = 0; b < kN; ++b) {
                m[a][b] = scale[2] * (z[2 * kN + a * kN + b] * inv) + base[2 * kN + a * kN + b];
                mx = fmaxf(mx, m[a][b]);
            }
            float sum = 0.0f;
            for (int b = 0; b < kN; ++b) sum += (m[a][b] = expf(m[a][b] - mx));
            for (int b = 0; b < kN; ++b) sm[a][b] = m[a][b] / sum + hc_eps;
        }
    }
    dev::sync_block();
    {
        const int id = static_cast<int>(dev::thread_x()), a = id / kN, b = id % kN;
        const bool mine = id < kN * kN;
        for (int it = 0; it < iters; ++it) {
            float sum = 0.0f;
            if (it > 0) {
                if (mine)
                    for (int j = 0; j < kN; ++j) sum += sm[a][j];
                sinkhorn_sync<kN>();
                if (mine) sm[a][b] /= sum + hc_eps;
                sinkhorn_sync<kN>();
                sum = 0.0f;
            }
            if (mine)
                for (int j = 0; j < kN; ++j) sum += sm[j][b];
            sinkhorn_sync<kN>();
            if (mine) sm[a][b] /= sum + hc_eps;
            sinkhorn_sync<kN>();
        }
        if (mine) comb[(t * kN + a) * kN + b] = sm[a][b];
    }
    dev::sync_block();
}

// The hyper head's weights of one token from z (rows of fn · v, then Σ v²) into p; ends
// with a barrier.
template <int kN>
__device__ inline void head_weights(const float* z, const float* __restrict__ base, const float* __restrict__ scale,
                                    int dim, float hc_eps, float norm_eps, float (&p)[kN]) {
    if (dev::thread_x() < kN) {
        const int k = static_cast<int>(dev::thread_x());
        const float inv = 1.0f / sqrtf(z[kN] / static_cast<float>(kN * dim) + norm_eps);
        p[k] = sigmoid(scale[0] * (z[k] * inv) + base[k]) + hc_eps;
    }
    dev::sync_block();
}

template <int kN>
__global__ void __launch_bounds__(kThreads) hc_mix_kernel(const float* __restrict__ x, const float* __restrict__ scratch,
                                                          const float* __restrict__ base, const float* __restrict__ scale,
                                                          int dim, int iters, float hc_eps, float norm_eps, float* post,
                                                          float* comb, float* u) {
    __shared__ float pre[kN];
    __shared__ float sm[kN][kN];  // comb under Sinkhorn
    const int t = static_cast<int>(dev::block_x());
    constexpr int kRows = (2 + kN) * kN;
    mix_weights<kN>(scratch + static_cast<size_t>(t) * (kRows + 1), t, base, scale, dim, iters, hc_eps, norm_eps,
                    post, comb, pre, sm);
    const float* xt = x + static_cast<size_t>(t) * kN * dim;
    for (int d = dev::thread_x(); d < dim; d += kThreads) {
        float acc = pre[0] * xt[d];
#pragma unroll
        for (int k = 1; k < kN; ++k) acc += pre[k] * xt[k * dim + d];
        u[static_cast<size_t>(t) * dim + d] = acc;
    }
}

template <int kN>
__global__ void __launch_bounds__(kThreads) hc_head_mix_kernel(const float* __restrict__ x,
                                                               const float* __restrict__ scratch,
                                                               const float* __restrict__ base,
                                                               const float* __restrict__ scale, int dim, float hc_eps,
                                                               float norm_eps, float* y) {
    __shared__ float p[kN];
    const int t = static_cast<int>(dev::block_x());
    head_weights<kN>(scratch + static_cast<size_t>(t) * (kN + 1), base, scale, dim, hc_eps, norm_eps, p);
    const float* xt = x + static_cast<size_t>(t) * kN * dim;
    for (int d = dev::thread_x(); d < dim; d += kThreads) {
        float acc = p[0] * xt[d];
#pragma unroll
        for (int k = 1; k < kN; ++k) acc += p[k] * xt[k * dim + d];
        y[static_cast<size_t>(t) * dim + d] = acc;
    }
}

template <int kN>
__global__ void __launch_bounds__(kThreads) hc_post_kernel(float* x, const float* __restrict__ f,
                                                           const float* __restrict__ post,
                                                           const float* __restrict__ comb, int dim, long long total) {
    const long long i = static_cast<long long>(dev::block_x()) * kThreads + dev::thread_x();
    if (i >= total) return;
    const int t = static_cast<int>(i / dim);
    const int d = static_cast<int>(i % dim);
    float* xt = x + static_cast<size_t>(t) * kN * dim + d;
    const float* c = comb + t * kN * kN;
    float in[kN];
    for (int a = 0; a < kN; ++a) in[a] = xt[a * dim];
    const float fv = f[i];
    for (int b = 0; b < kN; ++b) {
        float acc = post[t * kN + b] * fv;
        for (int a = 0; a < kN; ++a) acc += c[a * kN + b] * in[a];
        xt[b * dim] = acc;
    }
}

// The fused site (hc_site, hc_head_site), first launch: one warp per block, a lane per
// channel d of all kT tokens. With f, the lane first expands the previous sub-block into its
// channel of x (the same sums in the same order as hc_post_kernel, written in place: no other
// thread touches these elements); then it multiplies its channel of every stream by the kZ
// rows of fn, so each weight of fn is read once for all tokens, and adds its squares. The
// warp reduces the kT·(kZ + 1) sums and writes them to partial[block][t][z]; the second
// launch adds the blocks' partials in a fixed order.
template <int kN, int kZ, int kT>
__global__ void __launch_bounds__(kWarp) hc_site_project_kernel(float* x, const float* __restrict__ f,
                                                                const float* __restrict__ post,
                                                                const float* __restrict__ comb,
                                                                const float* __restrict__ fn, int dim,
                                                                float* __restrict__ partial) {
    constexpr int kValues = kT * (kZ + 1);
    constexpr int kGroups = (kValues + kWarp - 1) / kWarp;
    const int d = static_cast<int>(dev::block_x()) * kWarp + static_cast<int>(dev::lane_id());
    float acc[kGroups * kWarp];
#pragma unroll
    for (int i = 0; i < kGroups * kWarp; ++i) acc[i] = 0.0f;
    if (d < dim) {
        float v[kT][kN];
#pragma unroll
        for (int t = 0; t < kT; ++t) {
            float* xt = x + static_cast<size_t>(t) * kN * dim + d;
            float in[kN];
#pragma unroll
            for (int a = 0; a < kN; ++a) in[a] = xt[a * dim];
            if (f) {
                const float fv = f[static_cast<size_t>(t) * dim + d];
                const float* c = comb + t * kN * kN;
#pragma unroll
                for (int b = 0; b < kN; ++b) {
                    float e = post[t * kN + b] * fv;
                    for (int a = 0; a < kN; ++a) e += c[a * kN + b] * in[a];
                    v[t][b] = e;
                }
#pragma unroll
                for (int b = 0; b < kN; ++b) xt[b * dim] = v[t][b];
            } else {
#pragma unroll
                for (int b = 0; b < kN; ++b) v[t][b] = in[b];
            }
            float ss = 0.0f;
#pragma unroll
            for (int k = 0; k < kN; ++k) ss += v[t][k] * v[t][k];
            acc[t * (kZ + 1) + kZ] = ss;
        }
        const size_t width = static_cast<size_t>(kN) * dim;
#pragma unroll
        for (int r = 0; r < kZ; ++r) {
            float wv[kN];
#pragma unroll
            for (int k = 0; k < kN; ++k) wv[k] = fn[r * width + static_cast<size_t>(k) * dim + d];
#pragma unroll
            for (int t = 0; t < kT; ++t) {
                float s = 0.0f;
#pragma unroll
                for (int k = 0; k < kN; ++k) s += wv[k] * v[t][k];
                acc[t * (kZ + 1) + r] = s;
            }
        }
    }
    // Warp sums, 32 values at a time: lane l ends with value g·32 + l of group g.
    float* out = partial + static_cast<size_t>(dev::block_x()) * kValues;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        float part[kWarp];
#pragma unroll
        for (int i = 0; i < kWarp; ++i) part[i] = acc[g * kWarp + i];
        dev::warp_reduce_scatter<kWarp>(part);
        const int value = g * kWarp + static_cast<int>(dev::lane_id());
        if (value < kValues) out[value] = part[0];
    }
}

// The fused site's second launch runs a block of kMixThreads per token: its first warp does
// Sinkhorn in registers while the others collapse and normalise the row, each keeping up to
// kMixKeep float4 groups of it in registers (dim <= 4 · kMixKeep · (kMixThreads − kWarp): one
// read of x, one write of the output; wider rows re-read their output). At 256 threads with
// Sinkhorn, the collapse and the norm's second pass one after another it took ~15 us a site
// on the H200 (ncu, 2026-12-02: 11 % of a decode step's kernel time), latency of one block's
// serial steps rather than bytes.
constexpr int kMixThreads = 1024;
constexpr int kMixKeep = 4;

// z[v] = Σ over the `parts` blocks of partial[block][t][v], v < values, blocks in order
// (one warp a value, lanes striding the blocks, then a fixed shuffle tree); ends with a barrier.
template <int kBlock>
__device__ inline void site_sums(const float* __restrict__ partial, int parts, int t, int tokens, int values,
                                 float* z) {
    const int warp = static_cast<int>(dev::thread_x()) / kWarp, lane = static_cast<int>(dev::lane_id());
    for (int v = warp; v < values; v += kBlock / kWarp) {
        float s = 0.0f;
        for (int p = lane; p < parts; p += kWarp) s += partial[(static_cast<size_t>(p) * tokens + t) * values + v];
        s = dev::warp_sum(s);
        if (lane == 0) z[v] = s;
    }
    dev::sync_block();
}

// The site's weights of one token from z, as mix_weights computes them but spread over
// threads: thread k < kN writes pre[k] and post[k], thread a < kN row a of the softmaxed comb
// logits into sm (each value with the same operations in the same order as mix_weights, so
// the bits are its bits). Ends with a barrier.
template <int kN>
__device__ inline void site_weights(const float* z, int t, const float* __restrict__ base,
                                    const float* __restrict__ scale, int dim, float hc_eps, float norm_eps,
                                    float* post, float (&pre)[kN], float (&sm)[kN][kN]) {
    const int id = static_cast<int>(dev::thread_x());
    if (id < kN) {
        constexpr int kRows = (2 + kN) * kN;  // hc_mix_rows(kN), spelled out: device code
        const float inv = 1.0f / sqrtf(z[kRows] / static_cast<float>(kN * dim) + norm_eps);
        const int k = id, a = id;
        pre[k] = sigmoid(scale[0] * (z[k] * inv) + base[k]) + hc_eps;
        post[t * kN + k] = 2.0f * sigmoid(scale[1] * (z[kN + k] * inv) + base[kN + k]);
        float m[kN];
        float mx = -3.0e38f;
        for (int b = 0; b < kN; ++b) {
            m[b] = scale[2] * (z[2 * kN + a * kN + b] * inv) + base[2 * kN + a * kN + b];
            mx = fmaxf(mx, m[b]);
        }
        float sum = 0.0f;
        for (int b = 0; b < kN; ++b) sum += (m[b] = expf(m[b] - mx));
        for (int b = 0; b < kN; ++b) sm[a][b] = m[b] / sum + hc_eps;
    }
    dev::sync_block();
}

// Sinkhorn on one warp, lane a·kN + b holding element (a, b) (kN·kN <= kWarp): row and column
// sums gathered by shuffles and added in the CPU's order, as mix_weights does; comb written.
template <int kN>
__device__ inline void sinkhorn_warp(const float (&sm)[kN][kN], int iters, float hc_eps, float* comb) {
    static_assert(kN * kN <= kWarp, "one warp holds the matrix");
    const int lane = static_cast<int>(dev::lane_id()), a = (lane / kN) % kN, b = lane % kN;
    const bool mine = lane < kN * kN;
    float m = sm[a][b];
    for (int it = 0; it < iters; ++it) {
        float sum = 0.0f;
        if (it > 0) {
#pragma unroll
            for (int j = 0; j < kN; ++j) sum += dev::shfl(m, a * kN + j);
            m /= sum + hc_eps;
            sum = 0.0f;
        }
#pragma unroll
        for (int j = 0; j < kN; ++j) sum += dev::shfl(m, j * kN + b);
        m /= sum + hc_eps;
    }
    if (mine) comb[a * kN + b] = m;
}

// Second launch, a block per token: the mix (pre/post/comb with Sinkhorn, or the hyper head's
// weights), the collapse Σ_k w_k x_k, and the RMSNorm of the collapsed row with norm_w. The
// first warp runs Sinkhorn (comb is for the next expand; the collapse needs only pre) while
// the other warps collapse, each channel summed over the streams in the order of
// hc_mix_kernel; the norm's sum of squares goes warp by warp in a fixed order.
template <int kN, bool kHead>
__global__ void __launch_bounds__(kMixThreads) hc_site_mix_kernel(const float* __restrict__ x,
                                                                  const float* __restrict__ partial, int parts,
                                                                  int tokens, const float* __restrict__ base,
                                                                  const float* __restrict__ scale, int dim, int iters,
                                                                  float hc_eps, float norm_eps,
                                                                  const float* __restrict__ norm_w, float* post,
                                                                  float* comb, float* out) {
    constexpr int kZ = kHead ? kN : (2 + kN) * kN;
    constexpr int kWarps = kMixThreads / kWarp;
    __shared__ float z[kZ + 1];
    __shared__ float pre[kN];
    __shared__ float sm[kN][kN];
    __shared__ float red[kWarps];
    const int t = static_cast<int>(dev::block_x());
    const int warp = static_cast<int>(dev::thread_x()) / kWarp;
    site_sums<kMixThreads>(partial, parts, t, tokens, kZ + 1, z);
    if constexpr (kHead)
        head_weights<kN>(z, base, scale, dim, hc_eps, norm_eps, pre);
    else
        site_weights<kN>(z, t, base, scale, dim, hc_eps, norm_eps, post, pre, sm);
    const int groups = dim / 4, workers = kMixThreads - kWarp;
    const int worker = static_cast<int>(dev::thread_x()) - kWarp;
    const float4* x4 = reinterpret_cast<const float4*>(x + static_cast<size_t>(t) * kN * dim);
    float4* o4 = reinterpret_cast<float4*>(out + static_cast<size_t>(t) * dim);
    auto collapse = [&](int g) {
        float4 v = x4[g];
        float4 acc = float4{pre[0] * v.x, pre[0] * v.y, pre[0] * v.z, pre[0] * v.w};
#pragma unroll
        for (int k = 1; k < kN; ++k) {
            v = x4[k * groups + g];
            acc.x += pre[k] * v.x;
            acc.y += pre[k] * v.y;
            acc.z += pre[k] * v.z;
            acc.w += pre[k] * v.w;
        }
        return acc;
    };
    float4 keep[kMixKeep];
    float ss = 0.0f;
    if (warp == 0) {
        if constexpr (!kHead) sinkhorn_warp<kN>(sm, iters, hc_eps, comb + t * kN * kN);
    } else {
#pragma unroll
        for (int i = 0; i < kMixKeep; ++i) {
            const int g = worker + i * workers;
            if (g < groups) {
                keep[i] = collapse(g);
                ss += keep[i].x * keep[i].x + keep[i].y * keep[i].y + keep[i].z * keep[i].z + keep[i].w * keep[i].w;
            }
        }
        for (int g = worker + kMixKeep * workers; g < groups; g += workers) {  // rows wider than the registers
            const float4 acc = collapse(g);
            o4[g] = acc;
            ss += acc.x * acc.x + acc.y * acc.y + acc.z * acc.z + acc.w * acc.w;
        }
    }
    ss = dev::warp_sum(ss);
    if (dev::lane_id() == 0) red[warp] = ss;
    dev::sync_block();
    float total = 0.0f;
#pragma unroll
    for (int w = 1; w < kWarps; ++w) total += red[w];
    if (warp == 0) return;
    const float inv = 1.0f / sqrtf(total / static_cast<float>(dim) + norm_eps);
    auto scaled = [&](float4 v, int g) {
        v = float4{v.x * inv, v.y * inv, v.z * inv, v.w * inv};
        if (norm_w) {
            const float* w = norm_w + 4 * g;
            v = float4{v.x * w[0], v.y * w[1], v.z * w[2], v.w * w[3]};
        }
        return v;
    };
#pragma unroll
    for (int i = 0; i < kMixKeep; ++i) {
        const int g = worker + i * workers;
        if (g < groups) o4[g] = scaled(keep[i], g);
    }
    for (int g = worker + kMixKeep * workers; g < groups; g += workers) o4[g] = scaled(o4[g], g);
}

void check_config(const char* kernel, int tokens, const HcConfig& c) {
    if (tokens < 0) throw_argument(kernel, "tokens must be >= 0");
    if (c.dim <= 0 || c.dim % 4 != 0) throw_argument(kernel, "dim must be a positive multiple of 4");
    if (c.sinkhorn_iters < 1) throw_argument(kernel, "sinkhorn_iters must be >= 1");
    if (c.streams < 1 || c.streams > kHcMaxStreams) throw_argument(kernel, "streams must be 1..8");
}

// Calls f(std::integral_constant<int, n>) for the runtime stream count n (1..kHcMaxStreams).
template <class F>
void with_streams(int n, F&& f) {
    switch (n) {
        case 1: f(std::integral_constant<int, 1>{}); break;
        case 2: f(std::integral_constant<int, 2>{}); break;
        case 3: f(std::integral_constant<int, 3>{}); break;
        case 4: f(std::integral_constant<int, 4>{}); break;
        case 5: f(std::integral_constant<int, 5>{}); break;
        case 6: f(std::integral_constant<int, 6>{}); break;
        case 7: f(std::integral_constant<int, 7>{}); break;
        case 8: f(std::integral_constant<int, 8>{}); break;
        default: throw_argument("hc", "streams must be 1..8");
    }
}

}  // namespace

void hc_pre(const float* x, int tokens, const HcWeights& w, const HcConfig& c, float* scratch, float* post,
            float* comb, float* u, void* stream) {
    check_config("hc_pre", tokens, c);
    if (tokens == 0) return;
    const auto s = static_cast<hipStream_t>(stream);
    const int rows = hc_mix_rows(c.streams);
    hc_project_kernel<<<dim3(rows + 1, tokens), dim3(kThreads), 0, s>>>(x, w.fn, rows, c.streams * c.dim, scratch);
    AFF_GPU_CHECK(hipGetLastError());
    with_streams(c.streams, [&](auto n) {
        hc_mix_kernel<decltype(n)::value><<<dim3(tokens), dim3(kThreads), 0, s>>>(
            x, scratch, w.base, w.scale, c.dim, c.sinkhorn_iters, c.hc_eps, c.norm_eps, post, comb, u);
    });
    AFF_GPU_CHECK(hipGetLastError());
}

void hc_post(float* x, const float* f, const float* post, const float* comb, int tokens, int dim, void* stream,
             int streams) {
    if (tokens < 0 || dim <= 0) throw_argument("hc_post", "tokens must be >= 0 and dim > 0");
    if (streams < 1 || streams > kHcMaxStreams) throw_argument("hc_post", "streams must be 1..8");
    const long long total = static_cast<long long>(tokens) * dim;
    if (total == 0) return;
    const unsigned blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
    with_streams(streams, [&](auto n) {
        hc_post_kernel<decltype(n)::value><<<dim3(blocks), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
            x, f, post, comb, dim, total);
    });
    AFF_GPU_CHECK(hipGetLastError());
}

void hc_head(const float* x, int tokens, const HcWeights& w, const HcConfig& c, float* scratch, float* y,
             void* stream) {
    check_config("hc_head", tokens, c);
    if (tokens == 0) return;
    const auto s = static_cast<hipStream_t>(stream);
    const int n = c.streams;
    hc_project_kernel<<<dim3(n + 1, tokens), dim3(kThreads), 0, s>>>(x, w.fn, n, n * c.dim, scratch);
    AFF_GPU_CHECK(hipGetLastError());
    with_streams(n, [&](auto kn) {
        hc_head_mix_kernel<decltype(kn)::value><<<dim3(tokens), dim3(kThreads), 0, s>>>(
            x, scratch, w.base, w.scale, c.dim, c.hc_eps, c.norm_eps, y);
    });
    AFF_GPU_CHECK(hipGetLastError());
}

bool hc_site_takes(int tokens, const HcConfig& c) {
    return tokens >= 1 && tokens <= kHcSiteMaxTokens && c.streams >= 1 && c.streams <= kHcSiteMaxStreams;
}

std::size_t hc_site_scratch_floats(int tokens, const HcConfig& c) {
    return static_cast<std::size_t>((c.dim + kWarp - 1) / kWarp) * tokens * (hc_mix_rows(c.streams) + 1);
}

namespace {

template <bool kHead>
void launch_site(float* x, const float* f, const float* post_in, const float* comb_in, float* post_out,
                 float* comb_out, int tokens, const HcWeights& w, const HcConfig& c, const float* norm_w,
                 float* scratch, float* out, hipStream_t s) {
    const int parts = (c.dim + kWarp - 1) / kWarp;
    with_streams(c.streams, [&](auto kn) {
        constexpr int kN = decltype(kn)::value;
        if constexpr (kN <= kHcSiteMaxStreams) {
            constexpr int kZ = kHead ? kN : (2 + kN) * kN;
            auto project = [&](auto kt) {
                constexpr int kT = decltype(kt)::value;
                hc_site_project_kernel<kN, kZ, kT><<<dim3(parts), dim3(kWarp), 0, s>>>(x, f, post_in, comb_in, w.fn,
                                                                                       c.dim, scratch);
            };
            switch (tokens) {
                case 1: project(std::integral_constant<int, 1>{}); break;
                case 2: project(std::integral_constant<int, 2>{}); break;
                case 3: project(std::integral_constant<int, 3>{}); break;
                default: project(std::integral_constant<int, 4>{}); break;
            }
            AFF_GPU_CHECK(hipGetLastError());
            hc_site_mix_kernel<kN, kHead><<<dim3(tokens), dim3(kMixThreads), 0, s>>>(
                x, scratch, parts, tokens, w.base, w.scale, c.dim, c.sinkhorn_iters, c.hc_eps, c.norm_eps, norm_w,
                post_out, comb_out, out);
            AFF_GPU_CHECK(hipGetLastError());
        }
    });
}

}  // namespace

void hc_site(float* x, const float* f, float* post, float* comb, int tokens, const HcWeights& w, const HcConfig& c,
             const float* norm_w, float* scratch, float* a, void* stream) {
    check_config("hc_site", tokens, c);
    if (!hc_site_takes(tokens, c)) throw_argument("hc_site", "needs 1..4 tokens and 1..4 streams");
    launch_site<false>(x, f, post, comb, post, comb, tokens, w, c, norm_w, scratch, a, static_cast<hipStream_t>(stream));
}

void hc_head_site(float* x, const float* f, const float* post, const float* comb, int tokens, const HcWeights& w,
                  const HcConfig& c, const float* norm_w, float* scratch, float* y, void* stream) {
    check_config("hc_head_site", tokens, c);
    if (!hc_site_takes(tokens, c)) throw_argument("hc_head_site", "needs 1..4 tokens and 1..4 streams");
    launch_site<true>(x, f, post, comb, nullptr, nullptr, tokens, w, c, norm_w, scratch, y,
                      static_cast<hipStream_t>(stream));
}

}  // namespace aff::gpu
