// Stop-string matching over streamed text, for the generation loop (generate.hpp): text is
// released as soon as it can no longer turn into a stop string, and a stop string itself is
// never released.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace aff {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
    // Adds text; returns what may be released now. `hit` turns true when a stop
    // string appeared (the returned text ends just before it; nothing follows).
    std::string push(std::string_view text, bool& hit);
    // Releases what was held back (generation ended without a stop string).
    std::string flush();

private:
    std::vector<std::string> stops_;
    std::string held_;
};

}  // namespace aff
