// Device test: kernels/moe_gemv.hip against its CPU twin (the format's reference decoder +
// a double dot) at the V4-Flash expert shapes, batch 1–4, 6 experts per launch and one,
// several grid sizes (one work item per warp, and many, which runs the prefetch path), plain
// and dependent launch, items of 8 rows (the default) and 4; the routed entry (moe_gemv_routed) for 1–4 tokens with experts shared
// between tokens, one and two matrices a launch, both input layouts of the forward, and
// per-expert TQ2875R flags choosing the rotated input; and the kernel's window decoder (tq2875_dequantize) against
// aff::quant::decode_block bit for bit, with the built-in codebook and a random one (fp16
// subnormals included). Random blocks include zero-scale blocks and blocks whose windows are
// all 0 or all 4095 (both ends of the window).
#include "device_test.hpp"

#include "libaff/gpu/reference/moe_gemv.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/half.hpp"
#include "libaff/quant/trellis.hpp"
#include "kernels/moe_gemv.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace aff::gpu::test;

namespace {

// rows × k/256 random blocks: random index bits and a random bf16 scale, except that about
// one block in 8 has scale 0, one in 16 all-zero index bits and one in 16 all-one bits.
std::vector<uint8_t> random_blocks(int rows, int k) {
    const size_t blocks = static_cast<size_t>(rows) * (k / aff::quant::kBlockWeights);
    std::vector<uint8_t> w(blocks * aff::quant::kBlockBytes);
    std::uniform_int_distribution<int> byte(0, 255), kind(0, 15);
    std::uniform_real_distribution<float> scale(-0.2f, 0.2f);
    for (size_t b = 0; b < blocks; ++b) {
        uint8_t* p = w.data() + b * aff::quant::kBlockBytes;
        const int what = kind(rng());
        for (int i = 0; i < aff::quant::kIndexBytes; ++i)
            p[i] = what == 0 ? 0 : what == 1 ? 0xff : static_cast<uint8_t>(byte(rng()));
        const uint16_t s = (what == 2 || what == 3) ? 0 : aff::quant::float_to_bf16(scale(rng()));
        p[aff::quant::kIndexBytes] = static_cast<uint8_t>(s);
        p[aff::quant::kIndexBytes + 1] = static_cast<uint8_t>(s >> 8);
    }
    return w;
}

aff::gpu::Buffer codebook_on_device(const aff::quant::Codebook& cb) {
    return to_device(std::vector<uint16_t>(cb.fp16_values().begin(), cb.fp16_values().end()));
}

std::string tuning_name(const aff::gpu::MoeGemvTuning& t) {
    return " blocks " + std::to_string(t.target_blocks) + (t.dependent_launch ? " dep" : "") + " rows " +
           std::to_string(t.item_rows);
}

// The routed tests' set-up: two random stacks of `experts` n × k experts (w1/w3 or one matrix),
// `tokens` tokens choosing kTopK distinct experts each, so tokens share some (with tokens == 3
// every token picks the same six: each expert serves all three), and per-expert TQ2875R flags
// (about half the experts); host copies and device copies. On the device each expert is one
// extent (its two matrices one after the other), the extents in reverse expert order, found
// through the expert table.
constexpr int kTopK = 6;
struct RoutedCase {
    int pairs = 0;
    size_t expert_bytes = 0;
    std::vector<uint8_t> stacks[2];
    aff::gpu::Buffer dextents, dtable;
    unsigned long long offset[2] = {0, 0};
    std::vector<int32_t> ids;
    aff::gpu::Buffer dids;
    std::vector<uint8_t> flags;
    aff::gpu::Buffer dflags;
};

RoutedCase make_routed_case(int n, int k, int experts, int tokens) {
    RoutedCase c;
    c.pairs = tokens * kTopK;
    c.expert_bytes = static_cast<size_t>(n) * (k / aff::quant::kBlockWeights) * aff::quant::kBlockBytes;
    for (int m = 0; m < 2; ++m) c.stacks[m] = random_blocks(n * experts, k);
    const size_t extent_bytes = 2 * c.expert_bytes;
    std::vector<uint8_t> extents(extent_bytes * experts);
    for (int e = 0; e < experts; ++e)
        for (int m = 0; m < 2; ++m)
            std::copy_n(c.stacks[m].data() + e * c.expert_bytes, c.expert_bytes,
                        extents.data() + (experts - 1 - e) * extent_bytes + m * c.expert_bytes);
    c.dextents = to_device(extents);
    std::vector<const uint8_t*> table(experts);
    for (int e = 0; e < experts; ++e) table[e] = c.dextents.as<uint8_t>() + (experts - 1 - e) * extent_bytes;
    c.dtable = to_device(table);
    c.offset[1] = c.expert_bytes;
    c.ids.resize(c.pairs);
    std::vector<int> order(experts);
    for (int t = 0; t < tokens; ++t) {
        for (int e = 0; e < experts; ++e) order[e] = e;
        if (tokens != 3) std::shuffle(order.begin(), order.end(), rng());
        for (int s = 0; s < kTopK; ++s) c.ids[t * kTopK + s] = order[s];
    }
    c.dids = to_device(c.ids);
    c.flags.resize(experts);
    for (uint8_t& f : c.flags) f = static_cast<uint8_t>(rng()() & 1u);
    c.dflags = to_device(c.flags);
    return c;
}

}  // namespace

AFF_DEVICE_TEST("moe_gemv") {
    const aff::quant::Codebook& cb = aff::quant::Codebook::builtin();
    aff::gpu::Buffer dcb = codebook_on_device(cb);
    struct Shape { const char* name; int n, k; };
    constexpr int kExperts = 6;
    for (const Shape sh : {Shape{"w1/w3", 2048, 4096}, Shape{"w2", 4096, 2048}, Shape{"small", 12, 1024}}) {
        std::vector<std::vector<uint8_t>> w;
        std::vector<aff::gpu::Buffer> dw;
        for (int e = 0; e < kExperts; ++e) {
            w.push_back(random_blocks(sh.n, sh.k));
            dw.push_back(to_device(w.back()));
        }
        for (int batch = 1; batch <= aff::gpu::kMoeGemvMaxBatch; ++batch) {
            std::vector<std::vector<float>> x, want;
            std::vector<aff::gpu::Buffer> dx;
            for (int e = 0; e < kExperts; ++e) {
                x.push_back(normal(static_cast<size_t>(batch) * sh.k));
                want.emplace_back(static_cast<size_t>(batch) * sh.n);
                aff::cpu::moe_gemv(w[e].data(), sh.n, sh.k, cb, x[e].data(), batch, want[e].data());
                dx.push_back(to_device(x[e]));
            }
            const std::string shape = std::string(sh.name) + " " + std::to_string(sh.n) + "x" + std::to_string(sh.k) +
                                      " batch " + std::to_string(batch);
            // The default (8-row items), plain launch, a small grid (the prefetch path), and
            // 4-row items with both grids.
            const aff::gpu::MoeGemvTuning tunings[] = {{528, true}, {528, false}, {7, true}, {528, true, 4}, {7, false, 4}};
            for (const aff::gpu::MoeGemvTuning& t : tunings) {
                for (const int count : {kExperts, 1}) {
                    std::vector<aff::gpu::Buffer> dy;
                    std::vector<aff::gpu::MoeGemvJob> jobs;
                    for (int e = 0; e < count; ++e) {
                        dy.push_back(poisoned(want[e].size()));
                        jobs.push_back({dw[e].as<uint8_t>(), dx[e].as<float>(), dy[e].as<float>()});
                    }
                    aff::gpu::Stream s;
                    aff::gpu::moe_gemv_tuned(jobs.data(), count, sh.n, sh.k, batch, dcb.as<uint16_t>(), t, s.handle());
                    s.synchronize();
                    std::vector<float> got_all, want_all;
                    for (int e = 0; e < count; ++e) {
                        const std::vector<float> got = to_host<float>(dy[e], want[e].size());
                        got_all.insert(got_all.end(), got.begin(), got.end());
                        want_all.insert(want_all.end(), want[e].begin(), want[e].end());
                    }
                    const std::string tuning = " experts " + std::to_string(count) + tuning_name(t);
                    add(rows, "moe_gemv", shape + tuning, nmse(got_all, want_all), aff::gpu::moe_gemv_max_nmse);
                }
            }
        }
    }
}

AFF_DEVICE_TEST("moe_gemv routed") {
    const aff::quant::Codebook& cb = aff::quant::Codebook::builtin();
    aff::gpu::Buffer dcb = codebook_on_device(cb);
    constexpr int kExperts = 10;
    struct Shape { int n, k; };
    for (const Shape sh : {Shape{256, 2048}, Shape{128, 1024}}) {
        for (int tokens = 1; tokens <= aff::gpu::kMoeGemvMaxBatch; ++tokens) {
            const RoutedCase rc = make_routed_case(sh.n, sh.k, kExperts, tokens);
            const int pairs = rc.pairs;
            const std::vector<int32_t>& ids = rc.ids;
            const std::vector<uint8_t>& flags = rc.flags;
            const size_t expert_bytes = rc.expert_bytes;
            for (const int matrices : {2, 1, 0}) {  // 0: one matrix with rotated experts
                for (const bool per_pair_input : {false, true}) {
                    // per_pair_input: every pair has its own input (w2 after the SwiGLU), else a
                    // token's experts share its input (w1/w3).
                    const bool rotated = matrices == 0;
                    const size_t inputs = static_cast<size_t>(per_pair_input ? pairs : tokens) * sh.k;
                    const std::vector<float> x = normal(inputs), x_rot = normal(inputs);
                    aff::gpu::Buffer dx = to_device(x), dx_rot = to_device(x_rot);
                    std::vector<float> want[2];
                    aff::gpu::Buffer dy[2];
                    aff::gpu::MoeGemvRouted r;
                    r.ids = rc.dids.as<int32_t>();
                    r.tokens = tokens;
                    r.top_k = kTopK;
                    r.matrices = rotated ? 1 : matrices;
                    r.experts = rc.dtable.as<const uint8_t*>();
                    r.experts_count = kExperts;
                    r.x = dx.as<float>();
                    if (rotated) {
                        r.rotated = rc.dflags.as<uint8_t>();
                        r.x_rotated = dx_rot.as<float>();
                    }
                    r.x_token_stride = static_cast<long long>(per_pair_input ? kTopK : 1) * sh.k;
                    r.x_slot_stride = per_pair_input ? sh.k : 0;
                    for (int m = 0; m < r.matrices; ++m) {
                        want[m].resize(static_cast<size_t>(pairs) * sh.n);
                        for (int j = 0; j < pairs; ++j) {
                            const std::vector<float>& xin = rotated && flags[ids[j]] ? x_rot : x;
                            const float* xj = xin.data() + (per_pair_input ? static_cast<size_t>(j) : j / kTopK) * sh.k;
                            aff::cpu::moe_gemv(rc.stacks[m].data() + ids[j] * expert_bytes, sh.n, sh.k, cb, xj, 1,
                                               want[m].data() + static_cast<size_t>(j) * sh.n);
                        }
                        dy[m] = poisoned(want[m].size());
                        r.offset[m] = rc.offset[m];
                        r.y[m] = dy[m].as<float>();
                    }
                    for (const aff::gpu::MoeGemvTuning t :
                         {aff::gpu::MoeGemvTuning{528, true}, aff::gpu::MoeGemvTuning{5, false},
                          aff::gpu::MoeGemvTuning{528, true, 4}, aff::gpu::MoeGemvTuning{5, true, 4}}) {
                        for (int m = 0; m < r.matrices; ++m) {
                            aff::gpu::Stream s;
                            s.fill(dy[m].data(), 0xff, want[m].size() * 4);  // NaN again before each launch
                            s.synchronize();
                        }
                        aff::gpu::Stream s;
                        aff::gpu::moe_gemv_routed(r, sh.n, sh.k, dcb.as<uint16_t>(), t, s.handle());
                        s.synchronize();
                        std::vector<float> got_all, want_all;
                        for (int m = 0; m < r.matrices; ++m) {
                            const std::vector<float> got = to_host<float>(dy[m], want[m].size());
                            got_all.insert(got_all.end(), got.begin(), got.end());
                            want_all.insert(want_all.end(), want[m].begin(), want[m].end());
                        }
                        add(rows, "moe_gemv",
                            "routed " + std::to_string(sh.n) + "x" + std::to_string(sh.k) + " tokens " +
                                std::to_string(tokens) + (rotated ? " rotated experts" : " matrices " + std::to_string(matrices)) +
                                (per_pair_input ? " per-pair input" : " per-token input") + tuning_name(t),
                            nmse(got_all, want_all), aff::gpu::moe_gemv_max_nmse);
                    }
                }
            }
        }
    }
}

AFF_DEVICE_TEST("moe_gemv decode") {
    // Random codebook: every finite fp16 pattern can occur, subnormals and -0 included.
    std::vector<uint16_t> values(aff::quant::Codebook::kEntries * aff::quant::Codebook::kDim);
    std::uniform_int_distribution<int> half(0, 0xffff);
    for (uint16_t& v : values) {
        do v = static_cast<uint16_t>(half(rng()));
        while ((v & 0x7c00u) == 0x7c00u);  // no infinities or NaN (the codebook refuses them)
    }
    const aff::quant::Codebook random_cb(values);
    const int nrows = 64, k = 4096;
    const std::vector<uint8_t> w = random_blocks(nrows, k);
    aff::gpu::Buffer dw = to_device(w);
    for (const aff::quant::Codebook* cb : {&aff::quant::Codebook::builtin(), &random_cb}) {
        std::vector<float> want(static_cast<size_t>(nrows) * k);
        for (size_t b = 0; b < want.size() / aff::quant::kBlockWeights; ++b)
            aff::quant::decode_block(w.data() + b * aff::quant::kBlockBytes, *cb, want.data() + b * aff::quant::kBlockWeights);
        aff::gpu::Buffer dcb = codebook_on_device(*cb), dout = poisoned(want.size());
        aff::gpu::Stream s;
        aff::gpu::tq2875_dequantize(dw.as<uint8_t>(), nrows, k, dcb.as<uint16_t>(), dout.as<float>(), s.handle());
        s.synchronize();
        const std::vector<float> got = to_host<float>(dout, want.size());
        size_t differ = 0;
        for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
        add(rows, "moe_gemv", std::string("decode bit-exact vs decode_block, ") +
                                              (cb == &random_cb ? "random" : "built-in") +
                                              " codebook, 64x4096 (elements differing)",
            static_cast<double>(differ), 0.0);
    }
}
