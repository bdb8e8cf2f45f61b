// Tests for loading a main container with its draft container (libaff/model/draft_load.hpp):
// the pair is one model whose trunk is the main container's, bit for bit, and whose mtp.*
// stages are the draft's (here tiny-a-fp8's MTP layer); a draft made against another
// codebook, of another model, or a file that is no draft is refused with one line naming it;
// the default draft path sits beside the main container.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/draft_load.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/quantize_model.hpp"

#include "unit/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {
const std::string models = std::string(AFF_TEST_DATA) + "/models";

void quantize(const std::string& src, const std::string& out, const std::string& codebook = "") {
    aff::quant::QuantizeOptions o;
    o.src_dir = src;
    o.out_path = out;
    o.tool = "aff-quantize test";
    o.draft = !codebook.empty();
    o.codebook_path = codebook;
    aff::ThreadPool pool(2);
    aff::quant::quantize_checkpoint(o, pool, aff::null_progress());
}

std::string load_error(const std::string& main, const std::string& draft) {
    aff::ThreadPool pool(1);
    try {
        aff::load_model_with_draft(main, draft, pool);
    } catch (const aff::Error& e) {
        return e.what();
    }
    return "(no error)";
}
}  // namespace

TEST_CASE("a main container and its draft container load as one model", "[model]") {
    aff::test::TempDir dir;
    quantize(models + "/tiny-a-fp8", dir / "m.aff");
    quantize(models + "/tiny-a-fp8", dir / "m.dspark.aff", dir / "m.aff");
    CHECK(aff::default_draft_path(dir / "m.aff") == dir / "m.dspark.aff");
    CHECK(aff::default_draft_path(models + "/tiny-a-fp8").empty());  // a checkpoint has its own

    aff::ThreadPool pool(2);
    auto alone = aff::Model::load(dir / "m.aff", pool);
    auto paired = aff::load_model_with_draft(dir / "m.aff", dir / "m.dspark.aff", pool);
    CHECK_FALSE(alone->has_mtp());
    REQUIRE(paired->has_mtp());
    // The trunk is the main container's.
    const std::vector<std::int32_t> tokens = {0, 5, 9, 33, 2, 17, 80, 41, 7, 3};
    aff::DecodeState a = alone->new_state(), b = paired->new_state();
    std::vector<float> streams;
    const std::vector<float> la = alone->forward(a, tokens, true);
    const std::vector<float> lb = paired->forward(b, tokens, true, &streams);
    CHECK(la == lb);
    // The MTP layer is the draft's: on the same inputs it gives the checkpoint's MTP logits but
    // for its experts' quantisation (dense weights are copied as stored).
    auto checkpoint = aff::Model::load(models + "/tiny-a-fp8", pool);
    const std::span<const std::int32_t> next = std::span(tokens).subspan(1);
    const std::span<const float> rows = std::span<const float>(streams).first(next.size() * 4 * 128);
    aff::DecodeState c = checkpoint->new_state(), d = paired->new_state();
    const std::vector<float> mc = checkpoint->mtp_forward(c, rows, next, true);
    const std::vector<float> mq = paired->mtp_forward(d, rows, next, true);
    REQUIRE(mc.size() == mq.size());
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < mc.size(); ++i) {
        diff = std::max(diff, double(std::fabs(mc[i] - mq[i])));
        scale = std::max(scale, double(std::fabs(mc[i])));
    }
    INFO("MTP logits, quantised experts against the checkpoint's: max|d|/max|ref| " << diff / scale);
    CHECK(diff > 0);
    CHECK(diff / scale < 0.1);
}

TEST_CASE("a draft container that does not pair with the main one is refused with one line", "[model]") {
    aff::test::TempDir dir;
    quantize(models + "/tiny-a-fp8", dir / "m.aff");
    // Another codebook: the built-in one with one entry changed.
    const aff::quant::Codebook& builtin = aff::quant::Codebook::builtin();
    std::vector<std::uint16_t> values(builtin.fp16_values().begin(), builtin.fp16_values().end());
    values[0] ^= 0x0001;
    aff::quant::Codebook(values).write_file(dir / "other.aqc");
    quantize(models + "/tiny-a-fp8", dir / "d-other.aff", dir / "other.aqc");
    const std::string ids = load_error(dir / "m.aff", dir / "d-other.aff");
    CHECK(ids.starts_with(dir / "d-other.aff" + ": the draft container's codebook "));
    CHECK(ids.ends_with(" (make it with aff-quantize --dspark --codebook m.aff)"));
    CHECK(ids.find('\n') == std::string::npos);
    // Another model's draft (tiny-a's config is not tiny-a-fp8's).
    quantize(models + "/tiny-a", dir / "a.aff");
    quantize(models + "/tiny-a-fp8", dir / "d.aff", dir / "m.aff");
    CHECK(load_error(dir / "a.aff", dir / "d.aff") ==
          dir / "d.aff" + ": the draft container's config is not the main container's (another model, or "
                                "other --layers): its geometry does not match");
    // A main container given as the draft, a draft given as the main one.
    CHECK(load_error(dir / "m.aff", dir / "a.aff") ==
          dir / "a.aff" + ": not a draft container (its metadata role is not \"draft\"; aff-quantize --dspark writes one)");
    CHECK(load_error(dir / "d-other.aff", dir / "m.aff").starts_with(dir / "d-other.aff" + ": a draft container"));
    CHECK(load_error(models + "/tiny-a-fp8", dir / "d-other.aff") ==
          "--draft-model: the model is a checkpoint directory, which carries its own mtp.* tensors; a draft container "
          "pairs with a main .aff container");
}
