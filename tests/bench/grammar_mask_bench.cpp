// Per-token cost of structured output's mask (libaff/runtime/token_constraint.hpp) over
// DeepSeek-V4's real vocabulary (129 280 ids from tokenizer.json): a nested schema with
// enums and a free-text string, and json_object mode, each walked along a fixed valid
// reply tokenized by the real tokenizer. Every token of the reply must be one the mask
// allows (else the bench fails). Prints the mean and worst mask time per token next to
// the bound that matters, one decode step of the model on the GPU (9.586 ms at batch 1
// on an H200, tests/bench/RESULTS.md, 2026-11-30), as a share of it.
// usage: grammar_mask_bench TOKENIZER_JSON [REPEATS]
#include "libaff/runtime/json_grammar.hpp"
#include "libaff/runtime/token_constraint.hpp"
#include "libaff/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr double kDecodeStepMs = 9.586;  // H200, batch 1, RESULTS.md

const char* const kSchema = R"({"type":"object","properties":{
  "title":{"type":"string"},"genre":{"enum":["fiction","poetry","essay","history"]},
  "year":{"type":"integer"},"rating":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}},
  "author":{"type":"object","properties":{"name":{"type":"string"},"alive":{"type":"boolean"}},"required":["name","alive"]}},
  "required":["title","genre","year","rating","tags","author"]})";

const char* const kReply =
    R"({"title": "The Long Walk Home, and Other Stories of the Northern Coast", "genre": "fiction", "year": 1987,)"
    R"( "rating": 4.25, "tags": ["sea", "family", "winter light"], "author": {"name": "Ingrid Solberg", "alive": false}})";

struct Figure {
    double mean_us = 0, max_us = 0;
    std::size_t tokens = 0;
};

Figure walk(const std::shared_ptr<const aff::TokenBytes>& vocab, const std::shared_ptr<const aff::JsonGrammar>& g,
            const std::vector<std::int32_t>& reply, int repeats) {
    Figure f;
    double total = 0;
    for (int r = 0; r < repeats; ++r) {
        aff::JsonConstraint c(vocab, g);
        std::vector<float> logits(vocab->bytes.size());
        for (std::int32_t t : reply) {
            std::fill(logits.begin(), logits.end(), 0.0f);
            const auto t0 = std::chrono::steady_clock::now();
            c.mask(logits);
            const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            if (logits[std::size_t(t)] != 0.0f) {
                std::fprintf(stderr, "grammar_mask_bench: the mask refused token %d of the valid reply\n", t);
                std::exit(1);
            }
            if (std::getenv("GRAMMAR_MASK_TRACE") && r == 0) std::fprintf(stderr, "%8.1f us before token %d\n", us, t);
            c.accept(t);
            total += us;
            f.max_us = std::max(f.max_us, us);
        }
        if (!c.matcher().complete()) {
            std::fprintf(stderr, "grammar_mask_bench: the reply did not complete the grammar\n");
            std::exit(1);
        }
    }
    f.tokens = reply.size();
    f.mean_us = total / double(reply.size() * std::size_t(repeats));
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: grammar_mask_bench TOKENIZER_JSON [REPEATS]\n");
        return 2;
    }
    const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
    const auto tok = aff::tokenizer::Tokenizer::from_json_file(argv[1]);
    std::vector<std::string> bytes;
    std::vector<std::int32_t> ends;
    for (std::int32_t id = 0; id < 129280; ++id) bytes.emplace_back(tok.contains(id) ? tok.token_bytes(id) : "");
    if (auto eos = tok.token_to_id("<｜end▁of▁sentence｜>")) ends.push_back(*eos);
    const auto t0 = std::chrono::steady_clock::now();
    const auto vocab = std::make_shared<aff::TokenBytes>(std::move(bytes), ends);
    const double index_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const auto t1 = std::chrono::steady_clock::now();
    const auto schema = aff::JsonGrammar::from_schema(nlohmann::ordered_json::parse(kSchema));
    const double compile_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
    std::vector<std::int32_t> reply;
    for (auto id : tok.encode(kReply)) reply.push_back(std::int32_t(id));
    std::printf("vocabulary index %.1f ms (once per model), schema compiled in %.1f us (once per request)\n", index_ms,
                compile_us);
    for (const auto& [name, g] : {std::pair{"json_schema (nested, enums)", schema},
                                  std::pair{"json_object", aff::JsonGrammar::any_object()}}) {
        const Figure f = walk(vocab, g, reply, repeats);
        std::printf("%-28s %zu tokens: mask mean %.1f us, worst %.1f us per token; bound: one decode step %.3f ms "
                    "(H200, batch 1): mean %.2f %%, worst %.2f %% of it\n",
                    name, f.tokens, f.mean_us, f.max_us, kDecodeStepMs, 100 * f.mean_us / (kDecodeStepMs * 1000),
                    100 * f.max_us / (kDecodeStepMs * 1000));
    }
    return 0;
}
