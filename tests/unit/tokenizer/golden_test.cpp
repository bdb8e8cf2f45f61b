// The tokenizer against its oracle: ids and decoded text that Hugging Face `tokenizers`
// 0.23 produced for every document of the committed corpus (tests/oracle/
// tokenizer_golden.py made tests/data/tokenizer/*.zst on the GPU machine). Exact equality.
#include "support.hpp"

#include "libaff/tokenizer/utf8.hpp"

#include <catch2/catch.hpp>

namespace tk = aff::tokenizer;

namespace {

struct Golden {
    std::vector<tk::TokenId> ids, plain_ids;
    bool round_trips;
    std::string decoded, decoded_skip;
};

const std::vector<std::string>& corpus() {
    static const std::vector<std::string> docs = aff_test::read_corpus();
    return docs;
}

const std::vector<Golden>& golden() {
    static const std::vector<Golden> all = [] {
        std::string data = aff_test::read_zst("golden.bin.zst");
        aff_test::Reader r{data};
        std::vector<Golden> out;
        for (const std::string& doc : corpus()) {
            Golden g;
            g.ids = r.ids();
            g.plain_ids = r.ids();
            g.round_trips = r.u32() & 1;
            g.decoded = g.round_trips ? tk::utf8_lossy(doc) : r.bytes();
            g.decoded_skip = r.bytes();
            out.push_back(std::move(g));
        }
        if (!r.done()) throw std::runtime_error("golden.bin has more records than the corpus");
        return out;
    }();
    return all;
}

}  // namespace

TEST_CASE("the corpus is the committed size and covers the scripts it claims", "[tokenizer]") {
    std::size_t bytes = 0;
    for (const auto& d : corpus()) bytes += d.size();
    CHECK(bytes >= 500 * 1000);
    std::string all;
    for (const auto& d : corpus()) all += d;
    for (const char* sample : {"模型", "テスト", "안녕하세요", "Привет", "مرحبا", "नमस्ते", "👨‍👩‍👧‍👦", "e\xCC\x81",
                               "<｜User｜>", "\r\n", "\t\t", "\xED\xA0\x80"})
        CHECK(all.find(sample) != std::string::npos);
}

TEST_CASE("encode gives Hugging Face's ids on every corpus document", "[tokenizer]") {
    const auto& tok = aff_test::deepseek();
    const auto& docs = corpus();
    std::size_t mismatches = 0, tokens = 0;
    for (std::size_t i = 0; i < docs.size(); ++i) {
        auto ids = tok.encode(docs[i]);
        tokens += ids.size();
        if (ids != golden()[i].ids) {
            if (++mismatches <= 3) {
                INFO("document " << i << ": " << tk::utf8_lossy(docs[i]).substr(0, 200));
                CHECK(ids == golden()[i].ids);
            }
        }
    }
    CHECK(mismatches == 0);
    CHECK(tokens > 150000);
}

TEST_CASE("encode without added tokens gives Hugging Face's ids with added_tokens removed", "[tokenizer]") {
    const auto& tok = aff_test::deepseek();
    const auto& docs = corpus();
    std::size_t mismatches = 0, differ_from_parsed = 0;
    for (std::size_t i = 0; i < docs.size(); ++i) {
        auto ids = tok.encode(docs[i], false);
        mismatches += ids != golden()[i].plain_ids;
        differ_from_parsed += golden()[i].plain_ids != golden()[i].ids;
    }
    CHECK(mismatches == 0);
    CHECK(differ_from_parsed > 20);  // the corpus does contain added-token strings
}

TEST_CASE("decode gives Hugging Face's text, with and without special tokens", "[tokenizer]") {
    const auto& tok = aff_test::deepseek();
    std::size_t mismatches = 0, skipped_some = 0;
    for (const Golden& g : golden()) {
        mismatches += tok.decode(g.ids) != g.decoded;
        mismatches += tok.decode(g.ids, true) != g.decoded_skip;
        skipped_some += g.decoded_skip != g.decoded;
    }
    CHECK(mismatches == 0);
    CHECK(skipped_some > 10);
}

TEST_CASE("decode round-trips every corpus document after U+FFFD repair", "[tokenizer]") {
    const auto& docs = corpus();
    std::size_t round_trips = 0;
    for (std::size_t i = 0; i < docs.size(); ++i) {
        round_trips += golden()[i].round_trips;
        CHECK(aff_test::deepseek().decode(golden()[i].ids) == tk::utf8_lossy(docs[i]));
    }
    CHECK(round_trips == docs.size());
}

TEST_CASE("decode of id slices cutting characters matches Hugging Face's U+FFFD output", "[tokenizer]") {
    const auto& tok = aff_test::deepseek();
    std::string data = aff_test::read_zst("windows.bin.zst");
    aff_test::Reader r{data};
    std::size_t n = 0, mismatches = 0, repaired = 0;
    while (!r.done()) {
        auto ids = r.ids();
        std::string want = r.bytes();
        mismatches += tok.decode(ids) != want;
        repaired += want.find(tk::replacement_character) != std::string::npos;
        ++n;
    }
    CHECK(n > 500);
    CHECK(mismatches == 0);
    CHECK(repaired > 20);
}

TEST_CASE("streaming decode of every corpus document equals decode and never splits a character",
          "[tokenizer]") {
    const auto& tok = aff_test::deepseek();
    std::size_t held = 0;
    for (const Golden& g : golden()) {
        tk::StreamDecoder stream(tok);
        std::string out;
        for (tk::TokenId id : g.ids) {
            std::string piece = stream.push(id);
            REQUIRE(tk::utf8_valid(piece));
            held += stream.pending() > 0;
            out += piece;
        }
        out += stream.finish();
        REQUIRE(out == g.decoded);
    }
    CHECK(held > 100);  // characters split across tokens do occur, and were held
}
