// The end-of-sequence rule aff-run's generations use: the model config's eos_token_ids, as
// GenerateOptions::is_end_token (generate.hpp) takes it. The server adds its tokenizer's
// end of sentence (libaff/serve/model_engine.cpp).
#pragma once

#include "libaff/checkpoint/config.hpp"

#include <cstdint>
#include <functional>

namespace aff {

// True for the config's EOS ids; `config` must outlive the function.
std::function<bool(std::int32_t)> config_end_tokens(const ModelConfig& config);

}  // namespace aff
