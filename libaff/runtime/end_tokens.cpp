// config_end_tokens (end_tokens.hpp).
#include "libaff/runtime/end_tokens.hpp"

#include <algorithm>

namespace aff {

std::function<bool(std::int32_t)> config_end_tokens(const ModelConfig& config) {
    return [&config](std::int32_t t) {
        return std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), t) != config.eos_token_ids.end();
    };
}

}  // namespace aff
