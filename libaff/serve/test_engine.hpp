// A scripted Engine for testing the server, its clients and the HTTP layer without a
// model. It is NOT a language model and never claims to be one: aff-serve selects it
// only with --test-engine, and its model id is "aff-test-engine".
//
// Byte-level "tokenizer" (token 0 = BOS, 1 = end of turn, 2 + b = byte b) over the
// real DeepSeek-V4 prompt text (dsv4_chat.hpp), and logits that put all the mass on
// the next byte of a reply chosen from the prompt, so rendering, sampling, stop
// strings, logprobs, the V4 reply parser, streaming and cancellation all run through
// the real code:
//   - completion prompt (no chat markup): " echo: <prompt>", then end of turn;
//   - last user message containing "count": "1 2 3 ..." without end (for length and
//     disconnect tests), `delay_ms` apart;
//   - containing "random": 24 letters drawn by the sampler from flat logits (so the
//     seed decides them), then end of turn;
//   - tools given and the last message from the user: a call to the first tool, its
//     first parameter (or "input") set to the user's text, written in V4's DSML
//     tool-call markup;
//   - last message from a tool: "The tool returned: <content>";
//   - otherwise "You said: <content>".
// In thinking mode the reply is preceded by "The user wrote N bytes." and </think>.
// Replies are parsed by the real V4 parser (dsv4_chat.hpp).
#pragma once

#include "libaff/serve/engine.hpp"

#include <memory>
#include <string>
#include <vector>

namespace aff::serve {

class TestEngine final : public Engine {
public:
    explicit TestEngine(std::size_t context_size = 4096, int delay_ms = 0);
    ~TestEngine() override;

    std::string model_id() const override { return "aff-test-engine"; }
    std::size_t context_size() const override { return context_size_; }
    std::size_t vocab_size() const override { return 258; }
    std::vector<std::int32_t> render_chat(const ChatPrompt& prompt) const override;
    std::string render_chat_text(const ChatPrompt& prompt) const override;
    std::vector<std::int32_t> tokenize(std::string_view text, bool add_bos) const override;
    std::string token_text(std::int32_t token) const override;
    std::unique_ptr<TokenTextStream> text_stream() const override;
    std::unique_ptr<ChatOutputParser> chat_parser(const ChatPrompt& prompt) const override;
    bool is_end_token(std::int32_t token) const override { return token == 1; }
    // The scripted sequence: its first forward after reset() reads the prompt and picks the
    // reply; each later token moves one byte on (after delay_ms). It gives the last
    // position's logits only (all_logits for more than one token is refused).
    Sequence& sequence() override { return *sequence_; }

private:
    std::size_t context_size_;
    std::unique_ptr<Sequence> sequence_;
};

}  // namespace aff::serve
