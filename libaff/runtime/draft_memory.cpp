// The draft gate's memory file (draft_memory.hpp, formats/draft-memory.md).
#include "libaff/runtime/draft_memory.hpp"

#include "libaff/core/atomic_file.hpp"
#include "libaff/core/hash.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace aff {

namespace {

constexpr const char* kFormat = "aff-draft-memory";
constexpr int kVersion = 1;
constexpr std::uintmax_t kMaxBytes = 1 << 16;  // a memory is a few hundred bytes: anything larger is not one

std::string cache_dir() {
    auto env = [](const char* name) {
        const char* v = std::getenv(name);
        return v && *v ? std::string(v) : std::string();
    };
    if (std::string d = env("AFF_CACHE_DIR"); !d.empty()) return d;
    if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/aff";
    if (std::string d = env("HOME"); !d.empty()) return d + "/.cache/aff";
    return "";
}

std::string file_identity(const std::string& path) {
    if (path.empty()) return "none";
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
    const std::string name = ec ? path : p.string();
    const auto size = std::filesystem::file_size(path, ec);
    const std::uintmax_t bytes = ec ? 0 : size;
    const auto time = std::filesystem::last_write_time(path, ec);
    const long long ticks = ec ? 0 : static_cast<long long>(time.time_since_epoch().count());
    return name + " " + std::to_string(bytes) + " " + std::to_string(ticks);
}

}  // namespace

std::string draft_memory_path(const std::string& setting, const std::string& key) {
    if (setting == "off") return "";
    if (!setting.empty()) return setting;
    const std::string dir = cache_dir();
    if (dir.empty()) return "";
    char name[48];
    std::snprintf(name, sizeof name, "draft-gate-%016llx.json",
                  static_cast<unsigned long long>(xxh3_64(key.data(), key.size())));
    return dir + "/" + name;
}

std::string draft_memory_key(const std::string& model_path, const std::string& draft_path, const std::string& backend,
                             const std::string& drafter) {
    return "model " + file_identity(model_path) + "\ndraft " + file_identity(draft_path) + "\nbackend " + backend +
           "\ndrafter " + drafter;
}

DraftMemorySite draft_memory_site(const DraftChoice& choice, const std::string& model_path, const Sequence& backend,
                                  std::size_t threads, const OpenedDrafter& drafter) {
    if (!dynamic_cast<const DraftGate*>(drafter.drafter.get())) return {};
    DraftMemorySite site;
    site.key = draft_memory_key(model_path, draft_model_to_load(choice, model_path),
                                backend.describe() + "; " + std::to_string(threads) + " threads", drafter.description);
    site.path = draft_memory_path(choice.memory, site.key);
    if (site.path.empty()) site.key.clear();
    return site;
}

DraftMemoryRead parse_draft_memory(std::string_view text, const std::string& key, const std::string& path) {
    DraftMemoryRead out;
    auto ignored = [&](const std::string& why) {
        out.warning = "draft memory " + path + " ignored: " + why;
        return out;
    };
    if (text.size() > kMaxBytes) return ignored("larger than a draft memory can be");
    const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return ignored("not JSON");
    auto string_field = [&](const char* name) {
        const auto it = j.find(name);
        return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (string_field("format") != kFormat) return ignored("not a draft memory (no \"format\": \"aff-draft-memory\")");
    const auto version = j.find("version");
    if (version == j.end() || !version->is_number_integer() || version->get<long long>() != kVersion)
        return ignored("version is not " + std::to_string(kVersion));
    if (string_field("key") != key) return ignored("made for another model, draft or backend");
    const auto plain = j.find("plain_tokens_per_second"), draft = j.find("draft_tokens_per_second");
    const auto base = j.find("base_run_cycles"), last = j.find("last_run");
    if (plain == j.end() || draft == j.end() || base == j.end() || last == j.end() || !plain->is_number() ||
        !draft->is_number() || !base->is_number_integer() || !last->is_string())
        return ignored("a field is missing or of the wrong type");
    GateMemory m;
    m.plain_rate = plain->get<double>();
    m.drafting_rate = draft->get<double>();
    if (!std::isfinite(m.plain_rate) || !std::isfinite(m.drafting_rate) || m.plain_rate < 0 || m.drafting_rate < 0)
        return ignored("a rate is negative or not finite");
    // An unsigned integer past long long's range reads as negative here: refused as such.
    const long long cycles = base->is_number_unsigned() && base->get<std::uint64_t>() > std::uint64_t(1) << 62
                                 ? -1
                                 : base->get<long long>();
    if (cycles < 0) return ignored("base_run_cycles is negative");
    const std::string way = last->get<std::string>();
    if (way != "plain" && way != "drafts" && way != "none") return ignored("last_run is not plain, drafts or none");
    m.base_run = static_cast<std::size_t>(cycles);
    m.last_run = way == "drafts" ? 1 : way == "plain" ? 0 : -1;
    out.memory = m;
    return out;
}

DraftMemoryRead read_draft_memory(const std::string& path, const std::string& key) {
    std::error_code ec;
    if (path.empty() || !std::filesystem::exists(path, ec)) return {};
    auto ignored = [&](const std::string& why) { return DraftMemoryRead{std::nullopt, "draft memory " + path + " ignored: " + why}; };
    if (!std::filesystem::is_regular_file(path, ec)) return ignored("not a regular file");
    if (std::filesystem::file_size(path, ec) > kMaxBytes) return ignored("larger than a draft memory can be");
    std::ifstream in(path, std::ios::binary);
    if (!in) return ignored("cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    return parse_draft_memory(text.str(), key, path);
}

std::string write_draft_memory(const std::string& path, const std::string& key, const GateMemory& memory) {
    if (path.empty()) return "";
    try {
        const std::filesystem::path parent = std::filesystem::path(path).parent_path();
        if (!parent.empty()) std::filesystem::create_directories(parent);
        const nlohmann::json j = {{"format", kFormat},
                                  {"version", kVersion},
                                  {"key", key},
                                  {"plain_tokens_per_second", memory.plain_rate},
                                  {"draft_tokens_per_second", memory.drafting_rate},
                                  {"base_run_cycles", memory.base_run},
                                  {"last_run", memory.last_run == 1 ? "drafts" : memory.last_run == 0 ? "plain" : "none"}};
        const std::string text = j.dump(2) + "\n";
        AtomicFile f(path);
        f.write(text.data(), text.size());
        f.commit();
    } catch (const std::exception& e) {
        return "draft memory " + path + " not written: " + e.what();
    }
    return "";
}

DraftMemoryNotes recall_draft_memory(Drafter* drafter, const std::string& path, const std::string& key) {
    DraftMemoryNotes notes;
    auto* gate = dynamic_cast<DraftGate*>(drafter);
    if (!gate || path.empty()) return notes;
    const DraftMemoryRead read = read_draft_memory(path, key);
    notes.warning = read.warning;
    if (!read.memory || !gate->recall(*read.memory)) return notes;
    const GateMemory& m = *read.memory;
    char line[160];
    if (gate->drafting())
        std::snprintf(line, sizeof line, "drafting first (measured %.2f x as fast as plain steps)", m.drafting_rate / m.plain_rate);
    else
        std::snprintf(line, sizeof line, "plain steps first (drafts measured %.2f x as fast)", m.drafting_rate / m.plain_rate);
    notes.recalled = "drafts: from " + path + ": " + line;
    return notes;
}

std::optional<std::string> keep_draft_memory(const Drafter* drafter, const std::string& path, const std::string& key) {
    const auto* gate = dynamic_cast<const DraftGate*>(drafter);
    if (!gate || path.empty()) return std::nullopt;
    const GateMemory m = gate->memory();
    if (m.plain_rate <= 0 && m.drafting_rate <= 0) return std::nullopt;
    return write_draft_memory(path, key, m);
}

}  // namespace aff
