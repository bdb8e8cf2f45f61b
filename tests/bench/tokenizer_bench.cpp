// Tokenizer encode speed, single thread, on the tokenizer test corpus: the whole corpus
// as one string, then line by line. Prints MB/s and tokens; tokenizer_bench_hf.py runs
// Hugging Face `tokenizers` on the same input as the peer (ratio in RESULTS.md).
// usage: tokenizer_bench TOKENIZER_JSON CORPUS_BIN [REPEATS]
#include "libaff/core/mapped_file.hpp"
#include "libaff/tokenizer/tokenizer.hpp"
#include "libaff/tokenizer/utf8.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace tk = aff::tokenizer;

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: tokenizer_bench TOKENIZER_JSON CORPUS_BIN [REPEATS]\n");
        return 2;
    }
    int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
    try {
        auto t0 = std::chrono::steady_clock::now();
        tk::Tokenizer tok = tk::Tokenizer::from_json_file(argv[1]);
        double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        aff::MappedFile corpus(argv[2]);
        // Documents joined by "\n", each repaired as the oracle does (errors="replace").
        std::string text;
        for (std::size_t pos = 0; pos + 4 <= corpus.size();) {
            std::uint32_t n;
            std::memcpy(&n, corpus.data() + pos, 4);
            text += tk::utf8_lossy(std::string_view(reinterpret_cast<const char*>(corpus.data()) + pos + 4, n));
            text += '\n';
            pos += 4 + n;
        }
        std::vector<std::string_view> lines;
        for (std::size_t a = 0; a < text.size();) {
            std::size_t b = text.find('\n', a);
            b = b == std::string::npos ? text.size() : b + 1;
            lines.push_back(std::string_view(text).substr(a, b - a));
            a = b;
        }
        std::printf("load %.3f s; corpus %zu bytes, %zu lines\n", load_s, text.size(), lines.size());
        auto run = [&](const char* name, auto&& body) {
            double best = 1e30;
            std::size_t tokens = 0;
            for (int r = 0; r < repeats; ++r) {
                auto s = std::chrono::steady_clock::now();
                tokens = body();
                best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
            }
            std::printf("aff %-10s %9zu tokens  %.4f s  %.2f MB/s\n", name, tokens, best, text.size() / best / 1e6);
        };
        // The first repeat fills the word cache, as Hugging Face's own cache fills.
        run("whole", [&] { return tok.encode(text).size(); });
        run("per-line", [&] {
            std::size_t n = 0;
            std::vector<tk::TokenId> ids;
            for (auto line : lines) {
                ids.clear();
                tok.encode_into(line, ids);
                n += ids.size();
            }
            return n;
        });
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
