// libFuzzer target: --draft auto's memory files (formats/draft-memory.md) as aff-run and
// aff-serve read them from the user's cache folder. Property: any bytes are read without a
// throw or crash, as a memory or as exactly one warning naming the file, never both; a memory
// read holds finite, non-negative rates, and a gate recalling it keeps its run bounds.
#include "libaff/runtime/draft_memory.hpp"
#include "tests/common/silent_drafter.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    // The key the seeds carry is this one: mutations reach the fields behind it.
    const aff::DraftMemoryRead r = aff::parse_draft_memory(text, "the key", "fuzz.json");
    if (r.memory.has_value() == !r.warning.empty()) std::abort();
    if (!r.warning.empty() && r.warning.rfind("draft memory fuzz.json ignored: ", 0) != 0) std::abort();
    if (r.memory) {
        const aff::GateMemory& m = *r.memory;
        if (!std::isfinite(m.plain_rate) || !std::isfinite(m.drafting_rate) || m.plain_rate < 0 || m.drafting_rate < 0)
            std::abort();
        aff::DraftGate gate(std::make_unique<aff::test::SilentDrafter>(), [] { return 0.0; });
        if (gate.recall(m)) {
            const std::size_t base = gate.memory().base_run;
            if (base < aff::DraftGate::run_cycles || base > aff::DraftGate::max_run_cycles) std::abort();
        }
    }
    return 0;
}
