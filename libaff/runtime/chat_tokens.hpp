// A rendered chat prompt (libaff/tokenizer/chat.hpp's pieces) as token ids: markup pieces
// with special-token parsing, message text without, so a user cannot forge turn markers.
// aff-run's chat mode and aff-serve's engines share it.
#pragma once

#include "libaff/tokenizer/chat.hpp"
#include "libaff/tokenizer/tokenizer.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace aff {

std::vector<std::int32_t> encode_chat_pieces(const tokenizer::Tokenizer& tokenizer,
                                             std::span<const chat::PromptPiece> pieces);

}  // namespace aff
