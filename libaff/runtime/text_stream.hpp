// Token ids to text as a generation streams them, for the generation loop's stop strings and
// for what a caller shows: a model's tokenizer (libaff/serve/model_engine.cpp) or the
// server's byte-level test engine implements it.
#pragma once

#include <cstdint>
#include <string>

namespace aff {

// Holds back the bytes of an unfinished UTF-8 character until the token that completes it.
class TokenTextStream {
public:
    virtual ~TokenTextStream() = default;
    virtual std::string push(std::int32_t token) = 0;
    virtual std::string finish() = 0;
};

}  // namespace aff
