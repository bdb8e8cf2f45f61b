// Finds the tokenizer that belongs to a model path, so that every tool reads "-m PATH"
// the same way: an explicit tokenizer.json wins, then a checkpoint directory's own
// tokenizer.json, then a container's TOKJ section (formats/container.md). aff-run and
// aff-serve both call this; neither knows where tokenizers live.
#pragma once

#include "libaff/tokenizer/tokenizer.hpp"

#include <optional>
#include <string>

namespace aff {

// nullopt when `tokenizer_path` is empty and the model carries no tokenizer. Throws
// aff::Error naming the file for a model path that does not exist ("cannot open: No such
// file or directory"), a tokenizer that exists but cannot be loaded, or a container that
// cannot be opened.
std::optional<tokenizer::Tokenizer> load_model_tokenizer(const std::string& model_path,
                                                         const std::string& tokenizer_path = {});

}  // namespace aff
