// Tests for runtime/draft_memory.hpp: where --draft auto's memory lives (the flag, the cache
// directories in their order, off), what its key depends on (a rewritten file is another
// model), the file's round trip, and every way a file is ignored with one warning naming it
// and why (missing is silent; corrupt, foreign, another version, another key, bad fields, a
// directory, too large), nothing left half-written; and the tools' two steps on a gate.
#include "libaff/runtime/draft_memory.hpp"

#include "../temp_dir.hpp"
#include "tests/common/silent_drafter.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

namespace {

// Sets an environment variable for a scope and puts back what was there.
struct EnvVar {
    std::string name;
    std::string old;
    bool had;
    EnvVar(std::string n, const char* value) : name(std::move(n)) {
        const char* v = std::getenv(name.c_str());
        had = v != nullptr;
        if (had) old = v;
        if (value) ::setenv(name.c_str(), value, 1);
        else ::unsetenv(name.c_str());
    }
    ~EnvVar() {
        if (had) ::setenv(name.c_str(), old.c_str(), 1);
        else ::unsetenv(name.c_str());
    }
};

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("the draft memory's place: the flag, then the cache directories, or none", "[runtime]") {
    const std::string key = "model m\ndraft none\nbackend cpu\ndrafter d";
    CHECK(aff::draft_memory_path("off", key).empty());
    CHECK(aff::draft_memory_path("/some/file.json", key) == "/some/file.json");
    EnvVar a("AFF_CACHE_DIR", "/c/aff"), x("XDG_CACHE_HOME", "/x"), h("HOME", "/home/u");
    const std::string in_aff = aff::draft_memory_path("", key);
    CHECK(in_aff.rfind("/c/aff/draft-gate-", 0) == 0);
    CHECK(in_aff.size() == std::string("/c/aff/draft-gate-").size() + 16 + 5);
    CHECK(aff::draft_memory_path("", key + " ") != in_aff);  // another key, another file
    {
        EnvVar a2("AFF_CACHE_DIR", nullptr);
        CHECK(aff::draft_memory_path("", key).rfind("/x/aff/draft-gate-", 0) == 0);
        EnvVar x2("XDG_CACHE_HOME", "");
        CHECK(aff::draft_memory_path("", key).rfind("/home/u/.cache/aff/draft-gate-", 0) == 0);
        EnvVar h2("HOME", nullptr);
        CHECK(aff::draft_memory_path("", key).empty());
    }
}

TEST_CASE("the draft memory's key changes with the model file, the draft, the backend and the drafter", "[runtime]") {
    aff::test::TempDir dir;
    const std::string model = dir / "m.aff", draft = dir / "m.dspark.aff";
    write_text(model, "abc");
    write_text(draft, "xy");
    const std::string k = aff::draft_memory_key(model, draft, "cpu", "drafts: mtp");
    CHECK(k == aff::draft_memory_key(model, draft, "cpu", "drafts: mtp"));
    CHECK(k != aff::draft_memory_key(model, "", "cpu", "drafts: mtp"));
    CHECK(k != aff::draft_memory_key(model, draft, "gpu", "drafts: mtp"));
    CHECK(k != aff::draft_memory_key(model, draft, "cpu", "drafts: dspark"));
    write_text(model, "abcd");  // rewritten: another size
    CHECK(k != aff::draft_memory_key(model, draft, "cpu", "drafts: mtp"));
}

TEST_CASE("a draft memory round-trips, and a bad one is ignored with one warning", "[runtime]") {
    aff::test::TempDir dir;
    const std::string key = "the key", path = dir / "sub/memory.json";
    // No file: no memory, no warning.
    aff::DraftMemoryRead none = aff::read_draft_memory(path, key);
    CHECK(!none.memory);
    CHECK(none.warning.empty());
    // Written (its folder made), read back.
    REQUIRE(aff::write_draft_memory(path, key, {900.5, 150.25, 224, 0}).empty());
    std::size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path / "sub")) files += e.path().filename() == "memory.json" ? 1 : 100;
    CHECK(files == 1);  // the memory, no temporary left
    const aff::DraftMemoryRead back = aff::read_draft_memory(path, key);
    REQUIRE(back.memory);
    CHECK(back.warning.empty());
    CHECK(back.memory->plain_rate == 900.5);
    CHECK(back.memory->drafting_rate == 150.25);
    CHECK(back.memory->base_run == 224);
    CHECK(back.memory->last_run == 0);
    REQUIRE(aff::write_draft_memory(path, key, {1.0, 2.0, 56, -1}).empty());
    CHECK(aff::read_draft_memory(path, key).memory->last_run == -1);

    auto ignored = [&](const std::string& text, const std::string& why) {
        write_text(path, text);
        const aff::DraftMemoryRead r = aff::read_draft_memory(path, key);
        CHECK(!r.memory);
        CHECK(r.warning == "draft memory " + path + " ignored: " + why);
    };
    const std::string good_head = R"({"format": "aff-draft-memory", "version": 1, "key": "the key", )";
    ignored("{\"format\": \"aff-draft", "not JSON");
    ignored("[1, 2]", "not JSON");
    ignored(R"({"version": 1})", "not a draft memory (no \"format\": \"aff-draft-memory\")");
    ignored(R"({"format": "aff-draft-memory", "version": 2})", "version is not 1");
    ignored(R"({"format": "aff-draft-memory", "version": "1"})", "version is not 1");
    ignored(R"({"format": "aff-draft-memory", "version": 1, "key": "other"})", "made for another model, draft or backend");
    ignored(good_head + R"("plain_tokens_per_second": 1.0})", "a field is missing or of the wrong type");
    ignored(good_head + R"("plain_tokens_per_second": "fast", "draft_tokens_per_second": 1, "base_run_cycles": 56, "last_run": "plain"})",
            "a field is missing or of the wrong type");
    ignored(good_head + R"("plain_tokens_per_second": -1, "draft_tokens_per_second": 1, "base_run_cycles": 56, "last_run": "plain"})",
            "a rate is negative or not finite");
    ignored(good_head + R"("plain_tokens_per_second": 1, "draft_tokens_per_second": 1, "base_run_cycles": -5, "last_run": "plain"})",
            "base_run_cycles is negative");
    ignored(good_head + R"("plain_tokens_per_second": 1, "draft_tokens_per_second": 1, "base_run_cycles": 5, "last_run": "maybe"})",
            "last_run is not plain, drafts or none");
    ignored(std::string(70000, ' '), "larger than a draft memory can be");
    std::filesystem::remove(path);
    std::filesystem::create_directory(path);
    const aff::DraftMemoryRead dir_read = aff::read_draft_memory(path, key);
    CHECK(!dir_read.memory);
    CHECK(dir_read.warning == "draft memory " + path + " ignored: not a regular file");
    // Not writable there: a warning naming it, nothing thrown.
    const std::string w = aff::write_draft_memory(path, key, {1.0, 2.0, 56, 0});
    CHECK(w.rfind("draft memory " + path + " not written: ", 0) == 0);
}

TEST_CASE("the tools' steps: a gate recalls and keeps its memory, another drafter neither", "[runtime]") {
    aff::test::TempDir dir;
    const std::string path = dir / "m.json", key = "k";
    REQUIRE(aff::write_draft_memory(path, key, {1000.0, 200.0, 56, 0}).empty());
    double now = 0;
    aff::DraftGate gate(std::make_unique<aff::test::SilentDrafter>(), [&now] { return now; });
    const aff::DraftMemoryNotes notes = aff::recall_draft_memory(&gate, path, key);
    CHECK(notes.warning.empty());
    CHECK(notes.recalled == "drafts: from " + path + ": plain steps first (drafts measured 0.20 x as fast)");
    CHECK(!gate.drafting());
    CHECK(gate.plain_rate() == 1000.0);
    // Kept: what it holds now (here what it recalled).
    std::filesystem::remove(path);
    CHECK(aff::keep_draft_memory(&gate, path, key) == std::optional<std::string>(""));
    REQUIRE(aff::read_draft_memory(path, key).memory);
    CHECK(aff::read_draft_memory(path, key).memory->drafting_rate == 200.0);
    // A gate that measured nothing writes nothing; a drafter that is no gate is left alone; no path, no file.
    aff::DraftGate blank(std::make_unique<aff::test::SilentDrafter>(), [] { return 0.0; });
    CHECK(!aff::keep_draft_memory(&blank, dir / "blank.json", key));
    CHECK(!std::filesystem::exists(dir / "blank.json"));
    aff::test::SilentDrafter plain;
    CHECK(aff::recall_draft_memory(&plain, path, key).recalled.empty());
    CHECK(!aff::keep_draft_memory(&plain, dir / "plain.json", key));
    CHECK(!std::filesystem::exists(dir / "plain.json"));
    CHECK(aff::recall_draft_memory(&gate, "", key).recalled.empty());
    // A memory for another key: the gate starts afresh, with the warning.
    aff::DraftGate other(std::make_unique<aff::test::SilentDrafter>(), [] { return 0.0; });
    const aff::DraftMemoryNotes o = aff::recall_draft_memory(&other, path, "another key");
    CHECK(o.recalled.empty());
    CHECK(o.warning == "draft memory " + path + " ignored: made for another model, draft or backend");
    CHECK(other.plain_rate() == 0);
}

TEST_CASE("a draft memory's bytes: fields of the wrong type are said, never thrown", "[runtime]") {
    auto why = [](const std::string& text) {
        const aff::DraftMemoryRead r = aff::parse_draft_memory(text, "k", "m.json");
        CHECK(!r.memory);
        return r.warning;
    };
    CHECK(why(R"({"format": 5})") == "draft memory m.json ignored: not a draft memory (no \"format\": \"aff-draft-memory\")");
    CHECK(why(R"({"format": "aff-draft-memory", "version": 1, "key": ["k"]})") ==
          "draft memory m.json ignored: made for another model, draft or backend");
    const std::string head = R"({"format": "aff-draft-memory", "version": 1, "key": "k", "plain_tokens_per_second": 1, )"
                             R"("draft_tokens_per_second": 1, "last_run": "plain", "base_run_cycles": )";
    CHECK(why(head + "18446744073709551615}") == "draft memory m.json ignored: base_run_cycles is negative");
    CHECK(why(head + "1.5}") == "draft memory m.json ignored: a field is missing or of the wrong type");
    CHECK(aff::parse_draft_memory(head + "56}", "k", "m.json").memory);
    // The fuzz target's seed (tests/data/draft-memory) is a memory for its key.
    std::ifstream seed(std::string(AFF_TEST_DATA) + "/draft-memory/plain-first.json");
    const std::string text((std::istreambuf_iterator<char>(seed)), std::istreambuf_iterator<char>());
    const aff::DraftMemoryRead r = aff::parse_draft_memory(text, "the key", "seed");
    REQUIRE(r.memory);
    CHECK(r.memory->base_run == 224);
}
