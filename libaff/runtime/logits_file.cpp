// The logits file of formats/logits.md.
#include "libaff/runtime/logits_file.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/mapped_file.hpp"

#include <cstring>

namespace aff {
namespace {

constexpr char kMagic[8] = {'A', 'F', 'F', 'L', 'O', 'G', 'I', 'T'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 32;
constexpr std::size_t kRecordHeaderBytes = 16;

template <class T>
T load(const std::uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);  // the format is little-endian, as are the hosts aff supports
    return v;
}

}  // namespace

LogitsFileWriter::LogitsFileWriter(const std::string& path, std::uint32_t vocab) : file_(path), vocab_(vocab) {
    if (vocab == 0) throw_internal("logits file with an empty vocabulary");
    std::uint8_t header[kHeaderBytes] = {};
    std::memcpy(header, kMagic, 8);
    std::memcpy(header + 8, &kVersion, 4);
    std::memcpy(header + 12, &vocab_, 4);
    file_.write(header, sizeof header);
}

void LogitsFileWriter::add(std::int64_t position, std::int32_t token, std::span<const float> logits) {
    if (logits.size() != vocab_) throw_internal("logits row of the wrong size");
    std::uint8_t head[kRecordHeaderBytes] = {};
    std::memcpy(head, &position, 8);
    std::memcpy(head + 8, &token, 4);
    file_.write(head, sizeof head);
    file_.write(logits.data(), logits.size_bytes());
    ++records_;
}

void LogitsFileWriter::commit() {
    file_.write_at(16, &records_, 8);
    file_.commit();
}

std::vector<LogitsRecord> read_logits_file(const std::string& path) {
    MappedFile m(path);
    const std::uint8_t* p = m.data();
    if (m.size() < kHeaderBytes) throw_format("truncated: " + std::to_string(m.size()) + " bytes, header needs 32", path);
    if (std::memcmp(p, kMagic, 8) != 0) throw_format("not a logits file (wrong magic)", path);
    const auto version = load<std::uint32_t>(p + 8);
    if (version != kVersion) throw_format("version " + std::to_string(version) + " is not supported (expected 1)", path);
    const auto vocab = load<std::uint32_t>(p + 12);
    if (vocab == 0) throw_format("field vocab is 0", path);
    const auto records = load<std::uint64_t>(p + 16);
    if (load<std::uint64_t>(p + 24) != 0) throw_format("reserved header field is not zero", path);
    const std::uint64_t record_bytes = kRecordHeaderBytes + 4ull * vocab;
    if (records > (m.size() - kHeaderBytes) / record_bytes || kHeaderBytes + records * record_bytes != m.size())
        throw_format("size " + std::to_string(m.size()) + " does not match " + std::to_string(records) +
                         " records of vocab " + std::to_string(vocab),
                     path);
    std::vector<LogitsRecord> out(records);
    for (std::uint64_t r = 0; r < records; ++r) {
        const std::uint8_t* q = p + kHeaderBytes + r * record_bytes;
        if (load<std::uint32_t>(q + 12) != 0) throw_format("record " + std::to_string(r) + ": reserved field is not zero", path);
        out[r].position = load<std::int64_t>(q);
        out[r].token = load<std::int32_t>(q + 8);
        out[r].logits.resize(vocab);
        std::memcpy(out[r].logits.data(), q + kRecordHeaderBytes, 4ull * vocab);
    }
    return out;
}

}  // namespace aff
