// How libaff reports long work without printing: it is handed a Progress and calls
// begin/advance/end. libaff/ui decides how (or whether) to show it.
#pragma once

#include <cstdint>
#include <string>

namespace aff {

class Progress {
public:
    virtual ~Progress() = default;
    // `total` is in `unit`s ("B" for bytes, "tensors", ...); 0 when unknown.
    virtual void begin(const std::string& stage, std::uint64_t total, const std::string& unit) = 0;
    virtual void advance(std::uint64_t done_delta) = 0;
    virtual void end() = 0;
    // A line the user should see even when progress is off (warnings, notes).
    virtual void note(const std::string& line) = 0;
};

// Reports nothing; for tests and for callers that do not care.
class NullProgress final : public Progress {
public:
    void begin(const std::string&, std::uint64_t, const std::string&) override {}
    void advance(std::uint64_t) override {}
    void end() override {}
    void note(const std::string&) override {}
};

NullProgress& null_progress();

}  // namespace aff
