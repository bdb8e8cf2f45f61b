// What the two MTP device tests share (mtp_test.cpp: the MTP logits; mtp_routes_test.cpp: the
// MTP layer's routing): the MTP calls of one prompt on the GPU, a drafter on the GPU MTP
// runner, and the container of V4-Flash's geometry with an MTP layer on which both tier the
// trunk; and the tokens of a generation (forward_ids_test.cpp, drawn_picks_test.cpp). They had
// each written these out; one copy keeps their calls the same calls.
#pragma once

#include "device_test.hpp"
#include "recording_drafter.hpp"
#include "../common/forwarding_mtp_runner.hpp"
#include "wide_container.hpp"

#include "libaff/core/error.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/gpu_mtp_runner.hpp"
#include "libaff/runtime/mtp_drafter.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aff::gpu::test {

// The MTP logits, concatenated, of: the trunk over toks[0, n) (a fresh state), the MTP layer
// over its positions 0..n-1 (tokens 1..n), then two chained steps on the layer's own streams
// (tokens n+1 and n+2; toks holds n + 3). On the GEMV path (gemm_min_tokens 0) these are the
// same calls on every model, so two models holding the same bytes give the same floats.
inline std::vector<float> mtp_run(GpuModel& g, const std::vector<std::int32_t>& toks, int n) {
    GpuDecodeState st = g.new_state();
    g.forward(st, std::span(toks).first(std::size_t(n)), true);
    GpuDecodeState m = g.new_mtp_state();
    g.keep_streams(m, 0, 0, n);
    std::vector<float> out = g.mtp_forward(m, std::span(toks).subspan(1, std::size_t(n)), MtpInput::trunk, true);
    for (int j = 0; j < 2; ++j) {
        const std::vector<float> more = g.mtp_forward(m, std::span(toks).subspan(std::size_t(n + 1 + j), 1), MtpInput::own);
        out.insert(out.end(), more.begin(), more.end());
    }
    return out;
}

// A drafter of up to k tokens on seq's GPU MTP runner; throws unsupported when seq has none.
inline std::unique_ptr<aff::MtpDrafter> gpu_drafter(aff::Sequence& seq, std::size_t k) {
    std::string why;
    std::unique_ptr<aff::MtpRunner> runner = aff::make_gpu_mtp_runner(seq, why);
    if (!runner) throw aff::Error(aff::ErrorKind::unsupported, "no GPU MTP runner: " + why);
    return std::make_unique<aff::MtpDrafter>(std::move(runner), k);
}

// A runner that forwards every call to `inner` but greedy_chain: the drafter then picks each
// guess on the host from the steps' logits rows (the path before the device chain), so tests
// can set the two side by side on the same backend.
class HostPicks final : public aff::test::ForwardingMtpRunner {
public:
    using ForwardingMtpRunner::ForwardingMtpRunner;
};

// gpu_drafter's, its guesses picked on the host (HostPicks).
inline std::unique_ptr<aff::MtpDrafter> host_pick_drafter(aff::Sequence& seq, std::size_t k) {
    std::string why;
    std::unique_ptr<aff::MtpRunner> runner = aff::make_gpu_mtp_runner(seq, why);
    if (!runner) throw aff::Error(aff::ErrorKind::unsupported, "no GPU MTP runner: " + why);
    return std::make_unique<aff::MtpDrafter>(std::make_unique<HostPicks>(std::move(runner)), k);
}

// The tokens `seq` generates for `opt` with `drafter` (null: none); logits_hook: an on_logits
// hook, so the loop takes the logits path; the stats into *stats when given.
inline std::vector<std::int32_t> generated(aff::Sequence& seq, const aff::GenerateOptions& opt, aff::Drafter* drafter,
                                           bool logits_hook, aff::GenerateStats* stats = nullptr) {
    std::vector<std::int32_t> tokens;
    aff::GenerateHooks h;
    h.on_step = [&](const aff::GenerationStep& s) {
        tokens.push_back(s.token);
        return true;
    };
    if (logits_hook) h.on_logits = [](std::int64_t, std::int32_t, std::span<const float>) {};
    h.drafter = drafter;
    const aff::GenerateStats s = aff::generate(seq, opt, h);
    if (stats) *stats = s;
    return tokens;
}

// Writes tmp/v4-1x8-mtp.aff: one layer and the MTP layer, 8 experts each (make_geometry_container
// --mtp's writer); returns its path.
inline std::string write_v4_mtp(const TempDir& tmp, aff::ThreadPool& pool) {
    return write_v4_geometry(tmp, "v4-1x8-mtp.aff", 1, 8, true, pool);
}

}  // namespace aff::gpu::test
