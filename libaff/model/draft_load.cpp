// A main container and its draft container as one Model (draft_load.hpp): the pairing checks,
// a TensorReader that takes the mtp.* tensors from the draft and the rest from the main
// container, and an ExpertSource that takes the draft stages' experts from the draft.
#include "libaff/model/draft_load.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/model/codebook_experts.hpp"
#include "libaff/model/container_experts.hpp"
#include "libaff/model/container_tensors.hpp"

#include <algorithm>
#include <filesystem>

namespace aff {

namespace {

bool is_draft_tensor(const std::string& name) { return name.starts_with("mtp."); }

// The main container's tensors but the mtp.* ones, which are the draft's.
class PairedReader final : public TensorReader {
public:
    PairedReader(const TensorReader& main, const TensorReader& draft) : main_(main), draft_(draft) {}
    bool has(const std::string& name) const override { return of(name).has(name); }
    std::vector<float> read_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const override {
        return of(name).read_f32(name, shape);
    }
    void check_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const override {
        of(name).check_f32(name, shape);
    }
    std::vector<std::int64_t> read_i64(const std::string& name, const std::vector<std::uint64_t>& shape) const override {
        return of(name).read_i64(name, shape);
    }
    std::string file_of(const std::string& name) const override { return of(name).file_of(name); }
    std::optional<Fp8Stored> fp8_stored(const std::string& name) const override { return of(name).fp8_stored(name); }

private:
    const TensorReader& of(const std::string& name) const { return is_draft_tensor(name) ? draft_ : main_; }
    const TensorReader& main_;
    const TensorReader& draft_;
};

// Layers below num_layers from the main container's source, the draft stages (num_layers + s)
// from the draft's (whose layer s is mtp.s).
class PairedExperts final : public ExpertSource, public CodebookExperts {
public:
    PairedExperts(std::shared_ptr<const ContainerExpertSource> main, std::shared_ptr<const ContainerExpertSource> draft,
                  int main_layers)
        : main_(std::move(main)), draft_(std::move(draft)), main_layers_(main_layers) {}
    void matvec(int layer, int expert, ExpertMatrix which, const float* x, float* y) const override {
        if (layer < main_layers_) main_->matvec(layer, expert, which, x, y);
        else draft_->matvec(layer - main_layers_, expert, which, x, y);
    }
    Stored codebook_matrix(int layer, int expert, ExpertMatrix which) const override {
        return layer < main_layers_ ? main_->codebook_matrix(layer, expert, which)
                                    : draft_->codebook_matrix(layer - main_layers_, expert, which);
    }
    const quant::Codebook& codebook() const override { return main_->codebook(); }

private:
    std::shared_ptr<const ContainerExpertSource> main_, draft_;
    int main_layers_;
};

}  // namespace

std::string default_draft_path(const std::string& model_path) {
    if (!std::filesystem::is_regular_file(model_path)) return "";
    constexpr std::string_view ext = ".aff";
    const std::string stem =
        model_path.ends_with(ext) ? model_path.substr(0, model_path.size() - ext.size()) : model_path;
    return stem + ".dspark.aff";
}

std::unique_ptr<Model> load_model_with_draft(const std::string& model_path, const std::string& draft_path,
                                             ThreadPool& pool, ForwardOptions options) {
    if (draft_path.empty()) return Model::load(model_path, pool, options);
    if (!std::filesystem::is_regular_file(model_path))
        throw_usage("--draft-model: the model is a checkpoint directory, which carries its own mtp.* tensors; a draft "
                    "container pairs with a main .aff container");
    auto main = std::make_shared<const Container>(Container::open(model_path));
    auto draft = std::make_shared<const Container>(Container::open(draft_path));
    if (is_draft_container(*main))
        throw_unsupported("a draft container (metadata role \"draft\") holds only the mtp.* stages for speculative "
                          "decoding; give the main container (and this file with --draft-model)",
                          model_path);
    if (!is_draft_container(*draft))
        throw_format("not a draft container (its metadata role is not \"draft\"; aff-quantize --dspark writes one)",
                     draft_path);
    const std::optional<std::string> main_id = main->codebook_id(), draft_id = draft->codebook_id();
    if (!main_id || !draft_id || *main_id != *draft_id)
        throw_format("the draft container's codebook " + draft_id.value_or("(none)") +
                         " is not the main container's " + main_id.value_or("(none)") +
                         " (make it with aff-quantize --dspark --codebook " +
                         std::filesystem::path(model_path).filename().string() + ")",
                     draft_path);
    const nlohmann::json* main_config = main->config();
    const nlohmann::json* draft_config = draft->config();
    if (!main_config || !draft_config || *main_config != *draft_config)
        throw_format("the draft container's config is not the main container's (another model, or other --layers): "
                     "its geometry does not match",
                     draft_path);
    ModelConfig config = container_model_config(*main, model_path);
    const ContainerTensorReader main_tensors(main);
    const ContainerTensorReader draft_tensors(draft, main_tensors.codebook());
    const PairedReader tensors(main_tensors, draft_tensors);
    const int stages = std::max(mtp_layers_present(tensors, config), dspark_stages_present(tensors));
    if (stages == 0) throw_format("the draft container holds neither an MTP layer nor DSpark stages", draft_path);
    // The draft's experts: a config of no main layers makes every layer a draft stage.
    ModelConfig draft_layers = config;
    draft_layers.num_layers = 0;
    auto experts = std::make_shared<const PairedExperts>(
        std::make_shared<const ContainerExpertSource>(main, main_tensors.codebook(), config, 0),
        std::make_shared<const ContainerExpertSource>(draft, main_tensors.codebook(), draft_layers, stages),
        config.num_layers);
    ModelWeights weights = load_model_weights(tensors, config, std::move(experts));
    return std::make_unique<Model>(std::move(config), std::move(weights), pool, options);
}

}  // namespace aff
