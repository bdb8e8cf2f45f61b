// Which route-trace phase (formats/route-trace.md §5) the tokens of each forward call of the
// generation loop get: the loop says what a call is before it makes it (generate.hpp's
// before_dispatch), and aff-run and aff-serve hand this to their recorder, so both tools and
// both backends (the GPU reports a call's routing inside the call: forward_routes.cpp) label
// the same calls alike.
#pragma once

#include "libaff/runtime/generate.hpp"
#include "libaff/trace/route_trace.hpp"

namespace aff {

// prompt: prefill; decode: decode; verify: draft-verify (every token of the call, the guesses
// the model then rejected included: they ran and their experts were read); replay: replay.
trace::Phase route_phase(Dispatch::Kind kind);

}  // namespace aff
