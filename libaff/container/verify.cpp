// The checks behind aff-verify (see verify.hpp for what each proves).
#include "libaff/container/verify.hpp"

#include "libaff/container/concat_map.hpp"
#include "libaff/container/layout.hpp"
#include "libaff/container/pipelined_read.hpp"
#include "libaff/container/sha256sums.hpp"
#include "libaff/container/split.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/units.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace aff {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Serialises progress.advance() from worker threads.
class LockedProgress final : public Progress {
public:
    explicit LockedProgress(Progress& inner) : inner_(inner) {}
    void begin(const std::string& s, std::uint64_t t, const std::string& u) override { inner_.begin(s, t, u); }
    void advance(std::uint64_t d) override {
        std::lock_guard<std::mutex> lock(mutex_);
        inner_.advance(d);
    }
    void end() override { inner_.end(); }
    void note(const std::string& line) override {
        std::lock_guard<std::mutex> lock(mutex_);
        inner_.note(line);
    }

private:
    Progress& inner_;
    std::mutex mutex_;
};

std::string status_text(const FileCheck& f) {
    switch (f.status) {
        case FileCheck::Status::ok: return "OK";
        case FileCheck::Status::mismatch: return "FAILED";
        case FileCheck::Status::missing:
        case FileCheck::Status::unreadable: return "FAILED open or read";
        case FileCheck::Status::skipped: return "skipped";
    }
    return "FAILED";
}

nlohmann::json file_json(const FileCheck& f) {
    nlohmann::json j = {{"name", f.name}, {"path", f.path}, {"status", to_string(f.status)}, {"bytes", f.bytes}};
    if (!f.detail.empty()) j["detail"] = f.detail;
    return j;
}

nlohmann::json digests_json(const TensorDigestReport& d) {
    nlohmann::json bad = nlohmann::json::array();
    for (const DigestMismatch& m : d.mismatches)
        bad.push_back({{"tensor", m.tensor}, {"expected", to_hex(m.expected)}, {"actual", to_hex(m.actual)}});
    return {{"tensors", d.tensors}, {"bytes", d.bytes}, {"mismatches", bad}};
}

std::string digest_failure(const std::string& path, const TensorDigestReport& d) {
    const DigestMismatch& m = d.mismatches.front();
    std::string s = path + ": tensor " + m.tensor + ": digest mismatch (directory " + to_hex(m.expected) + ", bytes " +
                    to_hex(m.actual) + ")";
    if (d.mismatches.size() > 1) s += "; " + std::to_string(d.mismatches.size() - 1) + " more bad tensors";
    return s;
}

}  // namespace

std::string_view to_string(FileCheck::Status s) {
    switch (s) {
        case FileCheck::Status::ok: return "ok";
        case FileCheck::Status::mismatch: return "mismatch";
        case FileCheck::Status::missing: return "missing";
        case FileCheck::Status::unreadable: return "unreadable";
        case FileCheck::Status::skipped: return "skipped";
    }
    return "unreadable";
}

bool SumsReport::ok() const {
    bool any = false;
    for (const FileCheck& f : files) {
        if (f.status == FileCheck::Status::skipped) continue;
        if (f.status != FileCheck::Status::ok) return false;
        any = true;
    }
    return any;
}

SumsReport check_sha256sums(const std::string& sums_path, const SumsOptions& options, Progress& progress) {
    const auto start = std::chrono::steady_clock::now();
    SumsReport r;
    r.sums_path = sums_path;
    const std::vector<ChecksumLine> lines = read_sha256sums(sums_path);
    const fs::path dir = fs::path(sums_path).parent_path();
    std::uint64_t total = 0;
    for (const ChecksumLine& l : lines) {
        FileCheck f;
        f.name = l.name;
        f.path = fs::path(l.name).is_absolute() ? l.name : (dir / l.name).string();
        struct stat st {};
        if (::stat(f.path.c_str(), &st) != 0) {
            if (errno == ENOENT) {
                f.status = options.ignore_missing ? FileCheck::Status::skipped : FileCheck::Status::missing;
                if (!options.ignore_missing) f.detail = "No such file or directory";
            }
            else f.status = FileCheck::Status::unreadable, f.detail = std::strerror(errno);
        } else {
            f.bytes = static_cast<std::uint64_t>(st.st_size);
            total += f.bytes;
        }
        r.files.push_back(std::move(f));
    }
    LockedProgress locked(progress);
    locked.begin("checking " + fs::path(sums_path).filename().string(), total, "B");
    ThreadPool pool(options.threads);
    std::atomic<std::size_t> next{0};
    pool.parallel_for(pool.size(), [&](std::size_t, std::size_t) {
        for (std::size_t i; (i = next.fetch_add(1)) < r.files.size();) {
            FileCheck& f = r.files[i];
            if (f.status != FileCheck::Status::ok) continue;
            try {
                const Sha256Digest d = sha256_file(f.path, locked);
                f.status = d == lines[i].digest ? FileCheck::Status::ok : FileCheck::Status::mismatch;
            } catch (const Error& e) {
                f.status = FileCheck::Status::unreadable;
                f.detail = e.message();
            }
        }
    });
    locked.end();
    r.bytes = total;
    r.seconds = seconds_since(start);
    return r;
}

ContainerReport verify_container(const std::string& path, std::size_t threads, Progress& progress) {
    const auto start = std::chrono::steady_clock::now();
    ContainerReport r;
    r.path = path;
    const Container c = Container::open(path);
    ThreadPool pool(threads);
    r.digests = check_tensor_digests(c, pool, progress);
    r.seconds = seconds_since(start);
    return r;
}

bool PartsReport::ok() const {
    for (const FileCheck& f : sums)
        if (f.status != FileCheck::Status::ok) return false;
    if (container_checked && !digests.ok()) return false;
    return !sums.empty() || container_checked;
}

PartsReport verify_parts(const std::string& any_part, const PartsOptions& options, Progress& progress) {
    const auto start = std::chrono::steady_clock::now();
    PartsReport r;
    r.parts = find_parts(any_part);
    r.base = parse_part_name(fs::path(any_part).filename().string())->base;
    std::vector<std::uint64_t> sizes;
    for (const std::string& p : r.parts) {
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0) throw_errno("cannot stat", p, errno);
        if (!S_ISREG(st.st_mode)) throw_io("not a regular file", p);
        sizes.push_back(static_cast<std::uint64_t>(st.st_size));
        r.size += sizes.back();
    }
    // aff-split makes every part but the last exactly --max-size long.
    for (std::size_t i = 1; i < sizes.size(); ++i)
        if (sizes[i] > sizes[0] || (i + 1 < sizes.size() && sizes[i] != sizes[0]))
            throw_format("part has " + std::to_string(sizes[i]) + " bytes but part 1 has " + std::to_string(sizes[0]) +
                             " (all parts but the last are the same size)",
                         r.parts[i]);

    // SHA256SUMS: the one named, or the one beside the parts.
    const fs::path dir = fs::path(any_part).parent_path();
    std::string sums_path = options.sums_path;
    if (sums_path.empty() && fs::exists(dir / "SHA256SUMS")) sums_path = (dir / "SHA256SUMS").string();
    std::map<std::string, Sha256Digest> expected;
    if (!sums_path.empty()) {
        for (const ChecksumLine& l : read_sha256sums(sums_path)) {
            expected[l.name] = l.digest;
            // Split with -o DIR, the whole file is listed relative to DIR ("../m.aff").
            const std::string file = fs::path(l.name).filename().string();
            if (file == r.base && l.name != r.base && !expected.count(r.base)) expected[r.base] = l.digest;
        }
        r.sums_path = sums_path;
    }
    std::vector<std::string> names;
    for (const std::string& p : r.parts) names.push_back(fs::path(p).filename().string());

    const bool want_sha = std::any_of(names.begin(), names.end(), [&](const std::string& n) { return expected.count(n); }) ||
                          expected.count(r.base);
    if (want_sha) {
        LockedProgress locked(progress);
        locked.begin("hashing the parts of " + r.base, r.size, "B");
        ThreadPool pool(3);
        Sha256 whole;
        for (std::size_t i = 0; i < r.parts.size(); ++i) {
            const SequentialFile file(r.parts[i]);
            Sha256 part;
            const BlockSink sinks[] = {
                [&](std::uint64_t, const std::uint8_t* p, std::size_t n) { whole.update(p, n); },
                [&](std::uint64_t, const std::uint8_t* p, std::size_t n) { part.update(p, n); },
            };
            pipelined_read(file.fd(), r.parts[i], sizes[i], 0, pool, sinks, [&](std::size_t n) { locked.advance(n); });
            if (auto it = expected.find(names[i]); it != expected.end())
                r.sums.push_back({names[i], r.parts[i], part.finish() == it->second ? FileCheck::Status::ok : FileCheck::Status::mismatch,
                                  "", sizes[i]});
        }
        locked.end();
        if (auto it = expected.find(r.base); it != expected.end())
            r.sums.push_back({r.base, "(concatenation of " + std::to_string(r.parts.size()) + " parts)",
                              whole.finish() == it->second ? FileCheck::Status::ok : FileCheck::Status::mismatch, "", r.size});
    }

    // The container inside, if it is one.
    {
        std::uint8_t magic[8] = {};
        const int fd = ::open(r.parts[0].c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) throw_errno("cannot open", r.parts[0], errno);
        const ssize_t got = ::pread(fd, magic, sizeof magic, 0);
        ::close(fd);
        r.is_container = got == 8 && std::equal(std::begin(magic), std::end(magic), container_layout::kMagic.begin());
    }
    if (r.is_container) {
        if (ConcatenatedMap::can_map(sizes)) {
            const ConcatenatedMap map(r.parts);
            const Container c = Container::open_bytes(map.bytes(), r.base + " (joined parts)");
            ThreadPool pool(options.threads);
            r.digests = check_tensor_digests(c, pool, progress);
            r.container_checked = true;
        } else {
            r.container_note = "parts are not whole 4096-byte pages, so they cannot be mapped end to end";
        }
    }
    if (!want_sha && !r.container_checked)
        throw_format("nothing to check the parts against: no SHA256SUMS line names them" +
                         std::string(r.is_container ? " and " + r.container_note : " and they do not hold an .aff container"),
                     r.parts[0]);
    r.seconds = seconds_since(start);
    return r;
}

void write_text(std::ostream& out, const SumsReport& r) {
    for (const FileCheck& f : r.files)
        if (f.status != FileCheck::Status::skipped) out << f.name << ": " << status_text(f) << '\n';
}

void write_text(std::ostream& out, const ContainerReport& r) {
    if (r.ok())
        out << r.path << ": OK (structure, " << r.digests.tensors << " tensor digests, " << format_bytes(r.digests.bytes) << ")\n";
    for (const DigestMismatch& m : r.digests.mismatches) out << r.path << ": tensor " << m.tensor << ": FAILED\n";
}

void write_text(std::ostream& out, const PartsReport& r) {
    for (const FileCheck& f : r.sums) out << f.name << ": " << status_text(f) << '\n';
    if (r.container_checked) {
        if (r.digests.ok())
            out << r.base << " (joined parts): OK (structure, " << r.digests.tensors << " tensor digests)\n";
        for (const DigestMismatch& m : r.digests.mismatches) out << r.base << " (joined parts): tensor " << m.tensor << ": FAILED\n";
    }
}

nlohmann::json to_json(const SumsReport& r) {
    nlohmann::json files = nlohmann::json::array();
    for (const FileCheck& f : r.files) files.push_back(file_json(f));
    return {{"mode", "sums"}, {"ok", r.ok()}, {"sums", r.sums_path}, {"files", files}, {"bytes", r.bytes}, {"seconds", r.seconds}};
}

nlohmann::json to_json(const ContainerReport& r) {
    return {{"mode", "container"}, {"ok", r.ok()}, {"file", r.path}, {"structure", "ok"}, {"digests", digests_json(r.digests)},
            {"seconds", r.seconds}};
}

nlohmann::json to_json(const PartsReport& r) {
    nlohmann::json files = nlohmann::json::array();
    for (const FileCheck& f : r.sums) files.push_back(file_json(f));
    nlohmann::json j = {{"mode", "parts"},
                        {"ok", r.ok()},
                        {"file", r.base},
                        {"parts", r.parts},
                        {"size", r.size},
                        {"sums", r.sums_path.empty() ? nlohmann::json() : nlohmann::json(r.sums_path)},
                        {"files", files},
                        {"container", r.is_container},
                        {"seconds", r.seconds}};
    if (r.container_checked) j["digests"] = digests_json(r.digests);
    if (!r.container_note.empty()) j["container_note"] = r.container_note;
    return j;
}

std::string failure_summary(const SumsReport& r) {
    if (r.ok()) return "";
    std::size_t bad = 0, unread = 0, checked = 0;
    for (const FileCheck& f : r.files) {
        if (f.status == FileCheck::Status::mismatch) ++bad;
        if (f.status == FileCheck::Status::missing || f.status == FileCheck::Status::unreadable) ++unread;
        if (f.status != FileCheck::Status::skipped) ++checked;
    }
    if (checked == 0) return r.sums_path + ": no file was verified";
    std::string s = r.sums_path + ": ";
    if (bad) s += std::to_string(bad) + " computed checksum" + (bad > 1 ? "s" : "") + " did NOT match";
    if (bad && unread) s += ", ";
    if (unread) s += std::to_string(unread) + " listed file" + (unread > 1 ? "s" : "") + " could not be read";
    return s;
}

std::string failure_summary(const ContainerReport& r) { return r.ok() ? "" : digest_failure(r.path, r.digests); }

std::string failure_summary(const PartsReport& r) {
    if (r.ok()) return "";
    for (const FileCheck& f : r.sums)
        if (f.status != FileCheck::Status::ok) return f.path + ": SHA-256 does not match " + r.sums_path;
    return digest_failure(r.base + " (joined parts)", r.digests);
}

}  // namespace aff
