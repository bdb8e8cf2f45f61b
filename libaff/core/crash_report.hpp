// What a crash leaves behind. A segmentation fault in a tool otherwise prints nothing, and the
// machines it happens on (a user's, a lent device) rarely have a debugger: the handler prints
// one line naming the signal and the tool, then one line per stack frame as "module+offset",
// the offset from the module's load address so that `addr2line -f -C -e <unstripped module>
// <offset>` on a build machine names the function and line even when the binary that crashed
// was stripped. Then the signal's default action ends the process (the exit status and any
// core dump are the usual ones).
#pragma once

namespace aff {

// Installs the handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT. `name` must outlive
// the process (a string literal or argv[0]); `before` (may be null) runs first and must be
// async-signal-safe (the live view restores the terminal with it). Idempotent.
void install_crash_report(const char* name, void (*before)() = nullptr);

}  // namespace aff
