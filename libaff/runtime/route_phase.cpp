// route_phase (route_phase.hpp).
#include "libaff/runtime/route_phase.hpp"

namespace aff {

trace::Phase route_phase(Dispatch::Kind kind) {
    switch (kind) {
        case Dispatch::Kind::prompt: return trace::Phase::prefill;
        case Dispatch::Kind::decode: return trace::Phase::decode;
        case Dispatch::Kind::verify: return trace::Phase::draft_verify;
        case Dispatch::Kind::replay: return trace::Phase::replay;
    }
    return trace::Phase::decode;
}

}  // namespace aff
