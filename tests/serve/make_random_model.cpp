// Writes a random tiny DeepSeek-V4 checkpoint with the real 129 280-token vocabulary, so
// the server, aff-run and the engine tests can drive the real tokenizer end to end
// without committing a large fixture. Geometry is tests/data/models/tiny-a's (model doc
// §8 layer order, CSA/HCA ratios, hash layers) at hidden size 32, no MTP layer; weights
// are BF16 drawn from a fixed-seed generator and scaled so activations stay O(1). The
// text it generates is noise: only the shape of the pipeline is being tested.
// The output is a pure function of the seed (about 24 MB; written in well under a second).
//     aff_make_random_model OUT_DIR [SEED]
// writes OUT_DIR/config.json and OUT_DIR/model.safetensors (official tensor names).
#include "../common/random_v4_checkpoint.hpp"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

namespace {

// tiny-a's layer order at hidden size 32 with the real vocabulary.
aff::test::V4Geometry geometry() {
    aff::test::V4Geometry g;
    g.vocab = 129280;
    g.hidden = 32;
    g.heads = 4;
    g.head_dim = 64;
    g.rope_dim = 32;
    g.q_lora_rank = 32;
    g.o_groups = 2;
    g.o_lora_rank = 16;
    g.window = 16;
    g.index_heads = 4;
    g.index_head_dim = 64;
    g.index_topk = 4;
    g.experts = 8;
    g.experts_per_token = 3;
    g.expert_width = 16;
    g.hc = 4;
    g.layer_types = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                     "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"};
    g.hash = {true, true, false, false, false, false};
    return g;
}

void write_model(const std::string& dir, std::uint64_t seed) {
    const aff::test::V4Geometry g = geometry();
    aff::test::RandomSafetensors w(seed);
    aff::test::write_v4_tensors(w, g, false);
    w.save_checkpoint(dir, aff::test::v4_config(g));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::fprintf(stderr, "usage: aff_make_random_model OUT_DIR [SEED]\n");
        return 2;
    }
    try {
        write_model(argv[1], argc == 3 ? std::stoull(argv[2]) : 1);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "aff_make_random_model: %s\n", e.what());
        return 1;
    }
    return 0;
}
