// Bytes read from a file (tensor names, section ids, JSON strings) end up in error lines
// and reports on a terminal; an ESC or a carriage return among them would let a crafted
// file retitle the window, clear the screen or hide what was printed. printable() is the
// one place that makes such bytes harmless.
#pragma once

#include <string>
#include <string_view>

namespace aff {

// Copies `text`, writing every control byte (0x00-0x1f, 0x7f), every C1 control
// (U+0080-U+009F) and every byte that is not part of valid UTF-8 as "\xHH"; printable
// ASCII and valid UTF-8 pass unchanged. A backslash stays a backslash.
std::string printable(std::string_view text);

}  // namespace aff
