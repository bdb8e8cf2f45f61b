// Is a model file complete against its config? The checks Model::load makes of every
// tensor (presence, shape, storage, scales, codebook, tid2eid's ids), made without
// decoding a weight, so that aff-quantize refuses an inconsistent checkpoint before it
// writes anything and aff-verify refuses a container aff-run could not load.
#pragma once

#include "libaff/checkpoint/checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace aff {

// `config` is the config.json the output will carry (maybe truncated to fewer layers).
// Throws the aff::Error loading would throw, naming the file and the tensor.
void check_checkpoint_complete(const Checkpoint& checkpoint, const nlohmann::json& config);

enum class Completeness { complete, no_config, no_model_config, draft };
// A container without a config in its metadata, or with one that is no complete
// DeepSeek-V4 config, is no model container (nothing to check against); a draft
// container holds only MTP stages (not checked). Throws as above otherwise.
Completeness check_container_complete(const std::string& path);

}  // namespace aff
