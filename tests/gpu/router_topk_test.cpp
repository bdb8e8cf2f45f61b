// Device test: kernels/router_topk.hip against the CPU forward's own router
// (libaff/model/router.hpp), learned layers (256 experts,
// top 6, random selection bias) and hash layers (tid2eid rows), 1 and 4 tokens; ids must be
// identical, weights within the bound.
#include "device_test.hpp"

#include "libaff/model/router.hpp"
#include "kernels/router_topk.hpp"

#include <algorithm>
#include <numeric>

using namespace aff::gpu::test;

AFF_DEVICE_TEST("router_topk") {
    const aff::gpu::RouterConfig c;  // 256 experts, top 6, scale 1.5
    const int vocab = 64;
    std::vector<int32_t> tid2eid(static_cast<size_t>(vocab) * c.top_k);
    std::vector<int> perm(c.experts);
    std::iota(perm.begin(), perm.end(), 0);
    for (int v = 0; v < vocab; ++v) {
        std::shuffle(perm.begin(), perm.end(), rng());
        std::copy(perm.begin(), perm.begin() + c.top_k, tid2eid.begin() + v * c.top_k);
    }
    for (const int tokens : {1, 4, 32}) {
        const std::vector<float> logits = normal(static_cast<size_t>(tokens) * c.experts, 0.0f, 3.0f);
        const std::vector<float> bias = normal(c.experts, 0.0f, 0.5f);
        std::vector<int32_t> token_ids(tokens);
        std::uniform_int_distribution<int> tok(0, vocab - 1);
        for (int32_t& t : token_ids) t = tok(rng());
        aff::gpu::Buffer dl = to_device(logits), db = to_device(bias), dt = to_device(tid2eid),
                         dtok = to_device(token_ids);
        for (const bool hash : {false, true}) {
            const size_t out = static_cast<size_t>(tokens) * c.top_k;
            std::vector<int32_t> want_ids(out);
            std::vector<float> want_w(out);
            aff::route(logits.data(), tokens, {c.experts, c.top_k, c.route_scale, true}, bias.data(),
                       hash ? tid2eid.data() : nullptr, token_ids.data(), want_ids.data(), want_w.data());
            aff::gpu::Buffer dids = poisoned(out, sizeof(int32_t)), dw = poisoned(out);
            aff::gpu::Stream s;
            aff::gpu::router_topk(dl.as<float>(), tokens, c, db.as<float>(), hash ? dt.as<int32_t>() : nullptr,
                                  dtok.as<int32_t>(), dids.as<int32_t>(), dw.as<float>(), s.handle());
            s.synchronize();
            const std::vector<int32_t> ids = to_host<int32_t>(dids, out);
            size_t differ = 0;
            for (size_t i = 0; i < out; ++i) differ += ids[i] != want_ids[i];
            const std::string what = std::string(hash ? "hash" : "learned+bias") + " " + std::to_string(tokens) + "x" +
                                     std::to_string(c.experts) + " top " + std::to_string(c.top_k);
            add(rows, "router_topk", what + ": ids differing", static_cast<double>(differ), 0.0);
            add(rows, "router_topk", what + ": weights", nmse(to_host<float>(dw, out), want_w),
                aff::gpu::router_topk_max_nmse);
        }
    }
}
