// A random DeepSeek-V4 checkpoint with DSpark draft stages (model doc §8.1's tiny geometry and
// its DSpark variant: 3 stages, taps on the trunk's last three layers, γ = 5, Markov rank 16,
// noise id 1023), for the DSpark tests (tests/unit/model/dspark_test.cpp,
// tests/unit/runtime/dspark_drafter_test.cpp) and the CLI cases that run it
// (tests/unit/runtime/make_dspark_model.cpp writes it for them). Dense linears FP8 with block
// scales, as the real checkpoint's; experts BF16. The bytes are a pure function of the seed.
#pragma once

#include "random_v4_checkpoint.hpp"

#include <cstdint>
#include <string>

namespace aff::test {

// §8.1: D 256, 6 layers [sliding, CSA, HCA, CSA, HCA, CSA], hash on the first two, H 4, Dh 128,
// Dr 64, q_lora 128, G 2 / Ro 64, W 16, indexer 4 / 128 / top 4, 16 experts / 4, I 128, hc 4,
// vocabulary 1024, swiglu limit 1.
inline V4Geometry tiny_v4_geometry() {
    V4Geometry g;
    g.vocab = 1024;
    g.hidden = 256;
    g.heads = 4;
    g.head_dim = 128;
    g.rope_dim = 64;
    g.q_lora_rank = 128;
    g.o_groups = 2;
    g.o_lora_rank = 64;
    g.window = 16;
    g.index_heads = 4;
    g.index_head_dim = 128;
    g.index_topk = 4;
    g.experts = 16;
    g.experts_per_token = 4;
    g.expert_width = 128;
    g.hc = 4;
    g.swiglu_limit = 1.0;
    g.layer_types = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                     "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"};
    g.hash = {true, true, false, false, false, false};
    return g;
}

// The same layer order at hidden size 64 (Dh 64, Dr 32, 8 experts of width 32, BF16 linears
// unless FP8 is asked for): the statistical tests, which run thousands of generations.
inline V4Geometry small_v4_geometry() {
    V4Geometry g = tiny_v4_geometry();
    g.hidden = 64;
    g.head_dim = 64;
    g.rope_dim = 32;
    g.q_lora_rank = 64;
    g.o_lora_rank = 32;
    g.index_head_dim = 64;
    g.experts = 8;
    g.experts_per_token = 2;
    g.expert_width = 32;
    return g;
}

// Writes dir/config.json and dir/model.safetensors; dense linears FP8 when dense_fp8 (which
// needs the §8.3 multiples of 128: the tiny geometry's, not the small one's).
inline void write_random_dspark_checkpoint(const std::string& dir, std::uint64_t seed = 1,
                                           const DsparkGeometry& d = {}, const V4Geometry& g = tiny_v4_geometry(),
                                           bool dense_fp8 = true) {
    RandomSafetensors w(seed);
    write_v4_tensors(w, g, dense_fp8);
    write_dspark_tensors(w, g, d, dense_fp8);
    nlohmann::json config = v4_config(g);
    add_dspark_config(config, g, d);
    w.save_checkpoint(dir, config);
}

}  // namespace aff::test
