// mHC kernels (declarations and contract in hc.hpp). The pre step and the hyper head share
// two launches: hc_project_kernel computes the rows of fn · v and Σ v² (one block per row and
// token, so the 24 × 16384 projection spreads over the chip), then a mix kernel turns them
// into pre/post/comb (Sinkhorn with a thread per element of the n×n matrix: 39
// normalisations) and collapses the streams. hc_post_kernel is one thread per (token,
// channel). The mix and expand kernels are templates on the stream count n (hc_mult), so
// their small arrays stay in registers.
#include "kernels/hc.hpp"

#include "aff/gpu/check.hpp"
#include "kernels/device_common.hpp"

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
#if defined(AFF_GPU_IS_CUDA)
        __syncwarp();
#else
        __builtin_amdgcn_wave_barrier();
#endif
    } else {
        dev::sync_block();
    }
}

template <int kN>
__global__ void __launch_bounds__(kThreads) hc_mix_kernel(const float* __restrict__ x, const float* __restrict__ scratch,
                                                          const float* __restrict__ base, const float* __restrict__ scale,
                                                          int dim, int iters, float hc_eps, float norm_eps, float* post,
                                                          float* comb, float* u) {
    __shared__ float pre[kN];
    __shared__ float sm[kN][kN];  // comb under Sinkhorn
    const int t = static_cast<int>(dev::block_x());
    if (dev::thread_x() == 0) {
        constexpr int kRows = (2 + kN) * kN;  // hc_mix_rows(kN), spelled out: device code
        const float* z = scratch + static_cast<size_t>(t) * (kRows + 1);
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
    // Sinkhorn, one thread per element (row and column sums still each on one thread, in the
    // same order as the CPU: the same result, without one thread doing every division).
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
    if (dev::thread_x() < kN) {
        const int k = static_cast<int>(dev::thread_x());
        const float* z = scratch + static_cast<size_t>(t) * (kN + 1);
        const float inv = 1.0f / sqrtf(z[kN] / static_cast<float>(kN * dim) + norm_eps);
        p[k] = sigmoid(scale[0] * (z[k] * inv) + base[k]) + hc_eps;
    }
    dev::sync_block();
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

}  // namespace aff::gpu
