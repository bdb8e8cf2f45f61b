// aff-split's work (see split.hpp). The whole-file hash and the part's hash+write are
// two sinks of pipelined_read, so the input is read once and both hashes run at once.
#include "libaff/container/split.hpp"

#include "libaff/container/pipelined_read.hpp"
#include "libaff/container/sha256sums.hpp"
#include "libaff/core/atomic_file.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/core/units.hpp"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace aff {

std::string part_name(std::string_view base, std::uint32_t index, std::uint32_t count) {
    char buf[40];
    std::snprintf(buf, sizeof buf, ".part-%05u-of-%05u", index, count);
    return std::string(base) + buf;
}

std::optional<PartName> parse_part_name(std::string_view file_name) {
    // ".part-" 5 digits "-of-" 5 digits = 20 characters after the base.
    constexpr std::size_t kSuffix = 20;
    if (file_name.size() <= kSuffix) return std::nullopt;
    const std::string_view s = file_name.substr(file_name.size() - kSuffix);
    if (s.substr(0, 6) != ".part-" || s.substr(11, 4) != "-of-") return std::nullopt;
    auto number = [](std::string_view d, std::uint32_t& out) {
        out = 0;
        for (char c : d) {
            if (c < '0' || c > '9') return false;
            out = out * 10 + static_cast<std::uint32_t>(c - '0');
        }
        return true;
    };
    PartName p;
    if (!number(s.substr(6, 5), p.index) || !number(s.substr(15, 5), p.count)) return std::nullopt;
    if (p.count == 0 || p.index == 0 || p.index > p.count) return std::nullopt;
    p.base = std::string(file_name.substr(0, file_name.size() - kSuffix));
    return p;
}

std::vector<std::string> find_parts(const std::string& any_part) {
    const fs::path given(any_part);
    const auto parsed = parse_part_name(given.filename().string());
    if (!parsed) throw_usage(any_part + ": not a part name (expected FILE.part-00001-of-0000N)");
    fs::path dir = given.parent_path();
    std::vector<std::string> paths;
    for (std::uint32_t i = 1; i <= parsed->count; ++i) {
        const fs::path p = dir / part_name(parsed->base, i, parsed->count);
        std::error_code ec;
        if (!fs::exists(p, ec)) throw_io("part " + std::to_string(i) + " of " + std::to_string(parsed->count) + " is missing", p.string());
        paths.push_back(p.string());
    }
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
        const auto other = parse_part_name(entry.path().filename().string());
        if (other && other->base == parsed->base && other->count != parsed->count)
            throw_format("extra part " + entry.path().filename().string() + " does not belong to the set of " +
                             std::to_string(parsed->count) + " parts",
                         (dir / entry.path().filename()).string());
    }
    if (ec) throw_io("cannot list the directory: " + ec.message(), dir.string());
    // Names with a non-digit or out-of-range index would not parse; catch them too.
    for (const auto& entry : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
        const std::string n = entry.path().filename().string();
        if (n.rfind(parsed->base + ".part-", 0) == 0 && !parse_part_name(n) && n.find(".tmp-") == std::string::npos)
            throw_format("extra part " + n + " beside the set of " + std::to_string(parsed->count) + " parts", (dir / n).string());
    }
    return paths;
}

namespace {

// The whole file's name in the sums file: relative to the sums file's folder, as
// `sha256sum -c` run there resolves it (just the name when the parts go beside it).
std::string listed_name(const std::string& input, const fs::path& out_dir) {
    std::error_code ec;
    const fs::path file = fs::weakly_canonical(fs::absolute(input), ec);
    const fs::path dir = fs::weakly_canonical(fs::absolute(out_dir.empty() ? fs::path(".") : out_dir), ec);
    const fs::path rel = file.lexically_relative(dir);
    return ec || rel.empty() ? file.string() : rel.string();
}

}  // namespace

SplitResult split_file(const std::string& input, const SplitOptions& options, Progress& progress) {
    if (options.max_size == 0) throw_usage("--max-size must be greater than zero");
    const SequentialFile in(input);
    struct stat st {};
    if (::fstat(in.fd(), &st) != 0) throw_errno("cannot stat", input, errno);
    if (!S_ISREG(st.st_mode)) throw_io("not a regular file", input);

    SplitResult r;
    r.input = input;
    r.name = fs::path(input).filename().string();
    r.size = static_cast<std::uint64_t>(st.st_size);
    r.dry_run = options.dry_run;
    const std::uint64_t count64 = r.size == 0 ? 1 : (r.size + options.max_size - 1) / options.max_size;
    if (count64 > kMaxParts)
        throw_usage(input + ": would need " + std::to_string(count64) + " parts; the most is 99999 (raise --max-size)");
    const auto count = static_cast<std::uint32_t>(count64);
    const fs::path out_dir = options.output_dir.empty() ? fs::path(input).parent_path() : fs::path(options.output_dir);
    for (std::uint32_t i = 0; i < count; ++i) {
        PartInfo p;
        p.name = part_name(r.name, i + 1, count);
        p.path = (out_dir / p.name).string();
        p.offset = std::uint64_t{i} * options.max_size;
        p.size = std::min(options.max_size, r.size - p.offset);
        r.parts.push_back(p);
    }
    r.sums_path = (out_dir / options.sums_name).string();
    r.listed_as = listed_name(input, out_dir);

    // A part of an earlier split into another count would make the set ambiguous.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(out_dir.empty() ? fs::path(".") : out_dir, ec)) {
        const auto other = parse_part_name(entry.path().filename().string());
        if (other && other->base == r.name && other->count != count)
            throw_io("a part of an earlier split is in the way (remove it first)", (out_dir / entry.path().filename()).string());
    }
    if (options.dry_run) return r;

    // Existing sums for other files are kept; ours are replaced.
    std::vector<ChecksumLine> kept;
    bool sums_had_ours = false;
    if (fs::exists(r.sums_path)) {
        std::set<std::string> ours{r.listed_as};
        for (const PartInfo& p : r.parts) ours.insert(p.name);
        for (ChecksumLine& l : read_sha256sums(r.sums_path)) {
            if (!ours.count(l.name)) kept.push_back(std::move(l));
            else sums_had_ours = true;
        }
    }

    // Every part is an unnamed temporary until all are written (AtomicFile).
    std::vector<std::unique_ptr<AtomicFile>> files;
    for (const PartInfo& p : r.parts) files.push_back(std::make_unique<AtomicFile>(p.path));

    Sha256 whole;
    std::vector<std::unique_ptr<Sha256>> part_hash;
    for (std::size_t i = 0; i < r.parts.size(); ++i) part_hash.push_back(std::make_unique<Sha256>());
    const BlockSink sinks[] = {
        [&](std::uint64_t, const std::uint8_t* p, std::size_t n) { whole.update(p, n); },
        [&](std::uint64_t off, const std::uint8_t* p, std::size_t n) {
            const std::size_t part = static_cast<std::size_t>(off / options.max_size);
            part_hash[part]->update(p, n);
            files[part]->write(p, n);
        },
    };
    ThreadPool pool(3);
    progress.begin("splitting " + r.name, r.size, "B");
    r.bytes_read = pipelined_read(in.fd(), input, r.size, options.max_size, pool, sinks,
                                  [&](std::size_t n) { progress.advance(n); });
    std::uint8_t probe;
    if (::read(in.fd(), &probe, 1) > 0) throw_io("file grew while it was being split", input);
    progress.end();
    r.digest = whole.finish();
    for (std::size_t i = 0; i < r.parts.size(); ++i) r.parts[i].digest = part_hash[i]->finish();

    AtomicFile sums(r.sums_path);
    for (const ChecksumLine& l : kept) {
        const std::string s = format_sha256sums_line(l);
        sums.write(s.data(), s.size());
    }
    for (const PartInfo& p : r.parts) {
        const std::string s = format_sha256sums_line({p.digest, p.name});
        sums.write(s.data(), s.size());
    }
    const std::string s = format_sha256sums_line({r.digest, r.listed_as});
    sums.write(s.data(), s.size());

    // The set appears as a whole or not at all. No old sums line may vouch for a mix of
    // old and new parts, and no old part may fill a gap in the new set: both go first.
    // Then the parts are renamed and the sums file last, all taken back on a failure or
    // a signal (commit_together). A SIGKILL between renames leaves either a set with a
    // part missing, which nothing loads, or every part and no sums lines for them.
    if (sums_had_ours) {
        std::string text;
        for (const ChecksumLine& l : kept) text += format_sha256sums_line(l);
        write_file_atomically(r.sums_path, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    }
    for (const PartInfo& p : r.parts)
        if (::unlink(p.path.c_str()) != 0 && errno != ENOENT) throw_errno("cannot remove the old part", p.path, errno);
    std::vector<AtomicFile*> set;
    for (auto& f : files) set.push_back(f.get());
    set.push_back(&sums);
    commit_together(set);
    return r;
}

void write_text(std::ostream& out, const SplitResult& r) {
    for (const PartInfo& p : r.parts) out << p.name << '\t' << p.size << (r.dry_run ? "" : "\t" + to_hex(p.digest)) << '\n';
}

nlohmann::json to_json(const SplitResult& r) {
    nlohmann::json parts = nlohmann::json::array();
    for (const PartInfo& p : r.parts) {
        nlohmann::json j = {{"name", p.name}, {"path", p.path}, {"offset", p.offset}, {"size", p.size}};
        if (!r.dry_run) j["sha256"] = to_hex(p.digest);
        parts.push_back(j);
    }
    nlohmann::json j = {{"file", r.input}, {"size", r.size}, {"dry_run", r.dry_run}, {"parts", parts}, {"bytes_read", r.bytes_read}};
    if (!r.dry_run) {
        j["sha256"] = to_hex(r.digest);
        j["sums"] = r.sums_path;
    }
    return j;
}

std::string summary_line(const SplitResult& r) {
    if (r.dry_run)
        return "dry run: " + r.input + " (" + format_bytes(r.size) + ") would make " + std::to_string(r.parts.size()) +
               " parts; nothing was read or written";
    return r.input + ": " + format_bytes(r.size) + " in " + std::to_string(r.parts.size()) + " parts, read once (" +
           std::to_string(r.bytes_read) + " of " + std::to_string(r.size) + " bytes read); sums in " + r.sums_path;
}

}  // namespace aff
