// The quality check of issue 5: on every tiny fixture, the container aff-quantize makes
// (quant::quantize_checkpoint, its library function; built-in codebook, automatic
// rotation, no imatrix) runs on the CPU path with its experts decoded on the fly, and
// its logits stay close to the original checkpoint's over a fixed token sequence: mean
// KL(p_orig || p_quant) and top-1 agreement within the bounds below. The bounds are the
// measured values (in each row's comment) with margin (about 1.5x the KL, 0.13-0.15
// below the top-1); the fixtures' random weights
// give nearly flat distributions (entropy about 5.0 of ln 256 = 5.55 nats), so the top
// token is often a near tie and top-1 agreement is low even where the KL is small.
// The second test does the same with an imatrix made from the fixture's own expert inputs
// on a short text (recorded through the ExpertSource, written as llama-imatrix's GGUF).
#include "logit_divergence.hpp"
#include "unit/quant/imatrix_writer.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/quant/quantize_model.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {
const std::string models = std::string(AFF_TEST_DATA) + "/models";

std::vector<float> all_logits(const aff::Model& model, const std::vector<std::int32_t>& tokens) {
    aff::DecodeState st = model.new_state();
    return model.forward(st, tokens, true);
}

struct Bound {
    const char* fixture;
    double max_kl, min_top1;
};
}  // namespace

TEST_CASE("aff-quantize's containers of every fixture stay close to the original logits", "[model]") {
    const Bound bounds[] = {
        // Measured 2026-11-29 (48 positions): KL nats, top-1 agreement.
        {"tiny-a", 0.08, 0.45},      // 0.0549, 0.583 (BF16 experts, D 128, I 32)
        {"tiny-a-fp8", 0.085, 0.45}, // 0.0572, 0.625 (FP4 experts dequantised exactly, FP8 dense)
        {"tiny-b", 0.17, 0.30},      // 0.1115, 0.438 (D 64)
        {"tiny-c", 0.01, 0.75},      // 0.0053, 0.896 (fused transformers experts, top-2 routing)
    };
    std::vector<std::int32_t> tokens;  // 48 positions over the whole vocabulary
    for (int i = 0; i < 48; ++i) tokens.push_back(static_cast<std::int32_t>((i * 37 + 11) % 256));
    const fs::path tmp = fs::temp_directory_path() / ("aff-quality-test-" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    aff::ThreadPool pool(2);
    for (const Bound& b : bounds) {
        INFO(b.fixture);
        aff::quant::QuantizeOptions opt;
        opt.src_dir = models + "/" + b.fixture;
        opt.out_path = (tmp / (std::string(b.fixture) + ".aff")).string();
        opt.tool = "quantised_quality_test";
        opt.created = "2026-01-01T00:00:00Z";
        aff::quant::quantize_checkpoint(opt, pool, aff::null_progress());
        auto original = aff::Model::load(opt.src_dir, pool);
        auto quantised = aff::Model::load(opt.out_path, pool);
        const int V = original->config().vocab_size;
        const aff::test::Divergence d =
            aff::test::divergence(all_logits(*original, tokens), all_logits(*quantised, tokens), V);
        INFO("KL " << d.kl << " nats, top-1 " << d.top1 << ", original entropy " << d.entropy);
        CHECK(d.kl > 0);  // the experts really are quantised
        CHECK(d.kl <= b.max_kl);
        CHECK(d.top1 >= b.min_top1);
    }
    fs::remove_all(tmp);
}

namespace {

// The routed experts of a model, recording what llama-imatrix records: per layer and
// expert, Σ x² per input column of the gate/up projections (the token's normalised hidden
// state) and of the down projection (the SwiGLU output), and the number of tokens.
class RecordingExperts final : public aff::ExpertSource {
public:
    RecordingExperts(std::shared_ptr<const aff::ExpertSource> inner, const aff::ModelConfig& c)
        : inner_(std::move(inner)), c_(c),
          hidden_(std::size_t(c.num_layers) * c.n_routed_experts * c.hidden_size, 0.0f),
          mid_(std::size_t(c.num_layers) * c.n_routed_experts * c.moe_intermediate_size, 0.0f),
          counts_(std::size_t(c.num_layers) * c.n_routed_experts, 0.0f) {}

    void matvec(int layer, int expert, aff::ExpertMatrix which, const float* x, float* y) const override {
        if (layer < c_.num_layers && which != aff::ExpertMatrix::w3) {  // w3 sees w1's input
            const std::lock_guard lock(mutex_);
            const std::size_t slot = std::size_t(layer) * c_.n_routed_experts + expert;
            if (which == aff::ExpertMatrix::w1) {
                counts_[slot] += 1.0f;
                for (int j = 0; j < c_.hidden_size; ++j) hidden_[slot * c_.hidden_size + j] += x[j] * x[j];
            } else {
                for (int j = 0; j < c_.moe_intermediate_size; ++j)
                    mid_[slot * c_.moe_intermediate_size + j] += x[j] * x[j];
            }
        }
        inner_->matvec(layer, expert, which, x, y);
    }

    // Expert calls recorded: tokens × experts per token × layers.
    std::size_t tokens() const {
        double n = 0;
        for (float c : counts_) n += c;
        return static_cast<std::size_t>(n);
    }

    // The recording as llama-imatrix's GGUF file (blk.L.ffn_{gate,up,down}_exps.weight).
    aff::test::Bytes imatrix() const {
        std::vector<aff::test::GgufTensor> t;
        const std::uint64_t E = std::uint64_t(c_.n_routed_experts), D = std::uint64_t(c_.hidden_size),
                            I = std::uint64_t(c_.moe_intermediate_size);
        for (int l = 0; l < c_.num_layers; ++l) {
            const std::vector<float> counts(counts_.begin() + l * E, counts_.begin() + (l + 1) * E);
            const std::vector<float> hidden(hidden_.begin() + l * E * D, hidden_.begin() + (l + 1) * E * D);
            const std::vector<float> mid(mid_.begin() + l * E * I, mid_.begin() + (l + 1) * E * I);
            for (const char* kind : {"gate", "up", "down"}) {
                const std::string name = "blk." + std::to_string(l) + ".ffn_" + kind + "_exps.weight";
                const bool down = std::string(kind) == "down";
                t.push_back({name + ".in_sum2", {down ? I : D, E}, down ? mid : hidden});
                t.push_back({name + ".counts", {1, E}, counts});
            }
        }
        return aff::test::gguf(t);
    }

private:
    std::shared_ptr<const aff::ExpertSource> inner_;
    aff::ModelConfig c_;
    mutable std::mutex mutex_;
    mutable std::vector<float> hidden_, mid_, counts_;
};

}  // namespace

TEST_CASE("an imatrix of the model's own activations keeps the quantised logits close too", "[model]") {
    // Calibration: the fixture's own activations on a short text (its bytes are the tokens
    // of these byte-level vocabularies); evaluation: the 48 positions of the test above.
    const std::string text =
        "The quick brown fox jumps over the lazy dog. Quantisation keeps what the inputs use; "
        "an importance matrix says which columns those are.";
    std::vector<std::int32_t> calibration{0};
    for (unsigned char ch : text) calibration.push_back(ch);
    std::vector<std::int32_t> tokens;
    for (int i = 0; i < 48; ++i) tokens.push_back(static_cast<std::int32_t>((i * 37 + 11) % 256));
    // Measured 2026-11-29 (48 positions): KL nats and top-1 agreement with the imatrix,
    // against the unweighted container of the test above. Weighting helped tiny-b and
    // tiny-c (KL -6 % and -23 %) and not tiny-a / tiny-a-fp8 (+14 % / +2 %, top-1 down):
    // 130 calibration tokens on random-weight fixtures say little about the 48 evaluation
    // positions, and weighted matrices give up the rotation (matrix.cpp's automatic choice).
    const Bound bounds[] = {
        {"tiny-a", 0.095, 0.37},      // 0.0624, 0.500 (unweighted 0.0549, 0.583)
        {"tiny-a-fp8", 0.09, 0.35},   // 0.0584, 0.479 (unweighted 0.0572, 0.625)
        {"tiny-b", 0.16, 0.39},       // 0.1045, 0.521 (unweighted 0.1115, 0.438)
        {"tiny-c", 0.0065, 0.72},     // 0.0040, 0.854 (unweighted 0.0053, 0.896)
    };
    const fs::path tmp = fs::temp_directory_path() / ("aff-imatrix-quality-test-" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    aff::ThreadPool pool(2);
    for (const Bound& b : bounds) {
        INFO(b.fixture);
        const std::string src = models + "/" + b.fixture;
        auto original = aff::Model::load(src, pool);
        const int V = original->config().vocab_size;
        REQUIRE(V >= 256);

        aff::ModelWeights weights = original->weights();
        auto recorder = std::make_shared<RecordingExperts>(weights.experts, original->config());
        weights.experts = recorder;
        const aff::Model recording(original->config(), std::move(weights), pool);
        all_logits(recording, calibration);
        const aff::ModelConfig& c = original->config();
        REQUIRE(recorder->tokens() == calibration.size() * c.experts_per_token * c.num_layers);
        const auto im = recorder->imatrix();
        const fs::path im_path = tmp / (std::string(b.fixture) + ".imatrix.gguf");
        std::ofstream(im_path, std::ios::binary)
            .write(reinterpret_cast<const char*>(im.data()), static_cast<std::streamsize>(im.size()));

        aff::quant::QuantizeOptions opt;
        opt.src_dir = src;
        opt.out_path = (tmp / (std::string(b.fixture) + ".aff")).string();
        opt.imatrix_path = im_path.string();
        opt.tool = "quantised_quality_test";
        opt.created = "2026-01-01T00:00:00Z";
        aff::quant::quantize_checkpoint(opt, pool, aff::null_progress());
        CHECK(aff::Container::open(opt.out_path).metadata().at("quantiser").at("imatrix") == true);
        auto quantised = aff::Model::load(opt.out_path, pool);
        const aff::test::Divergence d =
            aff::test::divergence(all_logits(*original, tokens), all_logits(*quantised, tokens), V);
        INFO("KL " << d.kl << " nats, top-1 " << d.top1);
        CHECK(d.kl > 0);
        CHECK(d.kl <= b.max_kl);
        CHECK(d.top1 >= b.min_top1);
    }
    fs::remove_all(tmp);
}
