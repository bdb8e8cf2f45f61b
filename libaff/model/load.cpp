// Model::load: one entry point for both kinds of model file. A directory is a Hugging
// Face checkpoint (every weight decoded to float32); a regular file is an .aff container
// (formats/container.md), whose dense weights are decoded at load and whose routed
// experts stay in the memory map behind a ContainerExpertSource. Both go through the
// same load_model_weights via TensorReader.
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/model/container_experts.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"

#include <filesystem>

namespace aff {

namespace {

std::unique_ptr<Model> load_container(const std::string& path, ThreadPool& pool, ForwardOptions options) {
    auto container = std::make_shared<const Container>(Container::open(path));
    if (auto role = container->metadata().find("role");
        role != container->metadata().end() && *role == "draft")
        throw_unsupported("a draft container (metadata role \"draft\") holds only MTP stages for speculative "
                          "decoding, which is not implemented yet; give the main container",
                          path);
    const nlohmann::json* config_json = container->config();
    if (!config_json) throw_format("metadata has no config (the model's config.json)", path);
    ModelConfig config = with_context("metadata config", [&] { return parse_model_config(*config_json, path); });
    ContainerTensorReader tensors(container);
    auto experts = std::make_shared<const ContainerExpertSource>(container, tensors.codebook(), config,
                                                                 mtp_layers_present(tensors, config));
    ModelWeights weights = load_model_weights(tensors, config, std::move(experts));
    return std::make_unique<Model>(std::move(config), std::move(weights), pool, options);
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, ThreadPool& pool, ForwardOptions options) {
    if (std::filesystem::is_regular_file(path)) return load_container(path, pool, options);
    Checkpoint ck(path);
    ModelConfig config = parse_model_config(ck.config_json(), ck.config_path());
    ModelWeights weights = load_model_weights(ck, config);
    return std::make_unique<Model>(std::move(config), std::move(weights), pool, options);
}

}  // namespace aff
