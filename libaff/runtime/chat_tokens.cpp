// Chat pieces to ids (see chat_tokens.hpp).
#include "libaff/runtime/chat_tokens.hpp"

namespace aff {

std::vector<std::int32_t> encode_chat_pieces(const tokenizer::Tokenizer& tokenizer,
                                             std::span<const chat::PromptPiece> pieces) {
    std::vector<tokenizer::Tokenizer::Piece> views;
    views.reserve(pieces.size());
    for (const chat::PromptPiece& p : pieces) views.push_back({p.text, p.markup});
    const auto ids = tokenizer.encode_pieces(views);
    return {ids.begin(), ids.end()};
}

}  // namespace aff
