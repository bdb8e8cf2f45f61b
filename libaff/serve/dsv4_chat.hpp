// DeepSeek-V4's chat format for the server: a validated ChatPrompt rendered into the
// prompt text the model was trained on, and the model's reply text split back into
// reasoning, content and tool calls as it streams. Both are thin adapters over
// libaff/tokenizer/chat.hpp (the renderer and the streaming DSML parser); this file
// only maps serve's types onto them. Used by every engine that speaks V4, including
// the scripted test engine, so the end-to-end tests exercise the real format.
#pragma once

#include "libaff/serve/engine.hpp"
#include "libaff/tokenizer/chat.hpp"

#include <memory>
#include <string>
#include <vector>

namespace aff::serve {

// Throws aff::Error (usage) naming the message the encoder cannot render.
std::string render_dsv4_prompt(const ChatPrompt& prompt);
// The same prompt as template markup and request text (an engine with a real tokenizer
// encodes it with Tokenizer::encode_pieces so the client's words stay plain text).
std::vector<chat::PromptPiece> render_dsv4_pieces(const ChatPrompt& prompt);

// A ChatOutputParser for a V4 reply; `thinking` as the prompt was rendered. A tool
// call comes out whole (begin, all arguments, end) once its invoke block has closed,
// so a client never receives a call that later proves malformed.
std::unique_ptr<ChatOutputParser> make_dsv4_parser(bool thinking);

}  // namespace aff::serve
