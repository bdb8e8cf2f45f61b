// Router kernel (declarations and contract in router_topk.hpp): one block of 256 threads per
// token. Scores s and selection keys s + bias go to shared memory; top-k is k rounds of a
// block arg-max (ties to the lower expert id), each round removing its winner. Hash layers
// read the token's tid2eid row instead. Thread 0 then normalises the k weights and writes
// them (and the ids) out, to the route ring's copy as well when one is given.
#include "kernels/router_topk.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 16;

__device__ inline float sqrt_softplus(float v) {
    const float sp = v > 20.0f ? v : log1pf(expf(v));  // PyTorch's softplus threshold
    return sqrtf(sp);
}

// (key, id) is better than (other_key, other_id): larger key, then lower id.
__device__ inline bool better(float key, int id, float other_key, int other_id) {
    return key > other_key || (key == other_key && id < other_id);
}

__global__ void __launch_bounds__(kThreads) router_topk_kernel(const float* __restrict__ logits, int experts, int top_k,
                                                               float route_scale, const float* __restrict__ bias,
                                                               const int32_t* __restrict__ tid2eid,
                                                               const int32_t* __restrict__ token_ids, int32_t* ids,
                                                               float* weights, int32_t* copy_ids, float* copy_weights) {
    __shared__ float score[kMaxExperts];
    __shared__ float key[kMaxExperts];
    __shared__ float red_key[kThreads / kWarp];
    __shared__ int red_id[kThreads / kWarp];
    __shared__ int chosen[kMaxTopK];
    const int t = static_cast<int>(dev::block_x());
    const int tid = static_cast<int>(dev::thread_x());
    const float* lt = logits + static_cast<size_t>(t) * experts;
    for (int e = tid; e < experts; e += kThreads) {
        score[e] = sqrt_softplus(lt[e]);
        key[e] = score[e] + (bias ? bias[e] : 0.0f);
    }
    dev::sync_block();

    if (tid2eid) {
        if (tid < top_k) chosen[tid] = tid2eid[static_cast<size_t>(token_ids[t]) * top_k + tid];
    } else {
        for (int round = 0; round < top_k; ++round) {
            float best = -3.0e38f;
            int best_id = experts;
            for (int e = tid; e < experts; e += kThreads)
                if (key[e] == key[e] && better(key[e], e, best, best_id)) {  // key[e] == key[e]: not NaN
                    best = key[e];
                    best_id = e;
                }
#pragma unroll
            for (int m = kWarp / 2; m > 0; m /= 2) {
                const float ok = dev::shfl_xor(best, m);
                const int oid = dev::shfl_xor(best_id, m);
                if (better(ok, oid, best, best_id)) {
                    best = ok;
                    best_id = oid;
                }
            }
            if (dev::lane_id() == 0) {
                red_key[tid / kWarp] = best;
                red_id[tid / kWarp] = best_id;
            }
            dev::sync_block();
            if (tid == 0) {
                float b = red_key[0];
                int bid = red_id[0];
                for (int w = 1; w < kThreads / kWarp; ++w)
                    if (better(red_key[w], red_id[w], b, bid)) {
                        b = red_key[w];
                        bid = red_id[w];
                    }
                if (bid >= experts) bid = 0;  // every key NaN: keep the index in range
                chosen[round] = bid;
                key[bid] = __builtin_nanf("");  // removed from later rounds
            }
            dev::sync_block();
        }
    }
    dev::sync_block();
    if (tid == 0) {
        float sum = 0.0f;
        for (int j = 0; j < top_k; ++j) sum += score[chosen[j]];
        for (int j = 0; j < top_k; ++j) {
            const float w = score[chosen[j]] / sum * route_scale;
            ids[t * top_k + j] = chosen[j];
            weights[t * top_k + j] = w;
            if (copy_ids) {
                copy_ids[t * top_k + j] = chosen[j];
                copy_weights[t * top_k + j] = w;
            }
        }
    }
}

}  // namespace

void router_topk(const float* logits, int tokens, const RouterConfig& c, const float* bias, const int32_t* tid2eid,
                 const int32_t* token_ids, int32_t* ids, float* weights, void* stream, const RouterCopy& copy) {
    if (c.experts < 1 || c.experts > kMaxExperts) throw_argument("router_topk", "experts must be 1..1024");
    if (c.top_k < 1 || c.top_k > kMaxTopK || c.top_k > c.experts)
        throw_argument("router_topk", "top_k must be 1..16 and at most the number of experts");
    if (tid2eid && !token_ids) throw_argument("router_topk", "a hash layer needs the token ids");
    if (tokens < 0) throw_argument("router_topk", "tokens must be >= 0");
    if (!copy.ids != !copy.weights) throw_argument("router_topk", "a copy needs both its ids and its weights");
    if (tokens == 0) return;
    router_topk_kernel<<<dim3(tokens), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        logits, c.experts, c.top_k, c.route_scale, bias, tid2eid, token_ids, ids, weights, copy.ids, copy.weights);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
