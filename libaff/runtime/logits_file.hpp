// Writes and reads the logits file of formats/logits.md, aff-run's record of the
// float32 logits of a sequence for offline comparison between runs and engines.
#pragma once

#include "libaff/core/atomic_file.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aff {

class LogitsFileWriter {
public:
    LogitsFileWriter(const std::string& path, std::uint32_t vocab);
    void add(std::int64_t position, std::int32_t token, std::span<const float> logits);
    // Writes the record count into the header and renames the file into place.
    void commit();

private:
    AtomicFile file_;
    std::uint32_t vocab_;
    std::uint64_t records_ = 0;
};

struct LogitsRecord {
    std::int64_t position = 0;
    std::int32_t token = 0;
    std::vector<float> logits;
};

// Reads a whole file; throws aff::Error (format) naming the file and the field at fault.
std::vector<LogitsRecord> read_logits_file(const std::string& path);

}  // namespace aff
