// Model::load: one entry point for both kinds of model file. A directory is a Hugging
// Face checkpoint (every weight decoded to float32); a regular file is an .aff container
// (formats/container.md), whose dense weights are decoded at load and whose routed
// experts stay in the memory map behind a ContainerExpertSource. Both go through the
// same load_model_weights via TensorReader.
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/model/container_experts.hpp"
#include "libaff/model/completeness.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"

#include <algorithm>
#include <filesystem>

namespace aff {

namespace {

std::unique_ptr<Model> load_container(const std::string& path, ThreadPool& pool, ForwardOptions options) {
    auto container = std::make_shared<const Container>(Container::open(path));
    if (is_draft_container(*container))
        throw_unsupported("a draft container (metadata role \"draft\") holds only the mtp.* stages for speculative "
                          "decoding; give the main container (and this file with --draft-model)",
                          path);
    ModelConfig config = container_model_config(*container, path);
    ContainerTensorReader tensors(container);
    auto experts = std::make_shared<const ContainerExpertSource>(container, tensors.codebook(), config,
                                                                 std::max(mtp_layers_present(tensors, config), dspark_stages_present(tensors)));
    ModelWeights weights = load_model_weights(tensors, config, std::move(experts));
    return std::make_unique<Model>(std::move(config), std::move(weights), pool, options);
}

}  // namespace

void check_checkpoint_complete(const Checkpoint& checkpoint, const nlohmann::json& config) {
    check_model_weights(checkpoint, parse_model_config(config, checkpoint.config_path()));
}

Completeness check_container_complete(const std::string& path) {
    auto container = std::make_shared<const Container>(Container::open(path));
    if (is_draft_container(*container)) return Completeness::draft;
    if (!container->config()) return Completeness::no_config;
    // A config that is no complete DeepSeek-V4 config (the format's own examples) says
    // nothing to check against; aff-run refuses such a container when it loads it.
    ModelConfig config;
    try {
        config = container_model_config(*container, path);
    } catch (const Error&) {
        return Completeness::no_model_config;
    }
    const ContainerTensorReader tensors(container);
    // Its constructor checks every routed expert's storage, shape and codebook.
    const ContainerExpertSource experts(container, tensors.codebook(), config,
                                        std::max(mtp_layers_present(tensors, config), dspark_stages_present(tensors)));
    check_model_weights(tensors, config, true);
    return Completeness::complete;
}

std::unique_ptr<Model> Model::load(const std::string& path, ThreadPool& pool, ForwardOptions options) {
    if (std::filesystem::is_regular_file(path)) return load_container(path, pool, options);
    Checkpoint ck(path);
    ModelConfig config = parse_model_config(ck.config_json(), ck.config_path());
    ModelWeights weights = load_model_weights(ck, config);
    return std::make_unique<Model>(std::move(config), std::move(weights), pool, options);
}

}  // namespace aff
