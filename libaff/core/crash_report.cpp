// install_crash_report (crash_report.hpp). Only async-signal-safe calls inside the handler,
// except backtrace() and dladdr(), which glibc makes safe enough once libgcc's unwinder is
// loaded: install_crash_report calls backtrace() once so that the handler never loads it.
#include "libaff/core/crash_report.hpp"

#include <csignal>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <execinfo.h>
#include <initializer_list>
#include <unistd.h>

namespace aff {

namespace {

const char* g_name = "aff";
void (*g_before)() = nullptr;

void put(const char* s) {
    std::size_t n = std::strlen(s);
    while (n > 0) {
        const ssize_t w = ::write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= std::size_t(w);
    }
}

void put_hex(std::uintptr_t v) {
    char b[2 + 2 * sizeof v + 1];
    int i = sizeof b - 1;
    b[i] = '\0';
    do {
        b[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v != 0 && i > 2);
    b[--i] = 'x';
    b[--i] = '0';
    put(b + i);
}

const char* signal_name(int sig) {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV (segmentation fault)";
        case SIGBUS: return "SIGBUS (bus error)";
        case SIGILL: return "SIGILL (illegal instruction)";
        case SIGFPE: return "SIGFPE (arithmetic fault)";
        case SIGABRT: return "SIGABRT (aborted)";
        default: return "a fatal signal";
    }
}

void on_crash(int sig, siginfo_t* info, void*) {
    if (g_before) g_before();
    put(g_name);
    put(": crashed with ");
    put(signal_name(sig));
    if (sig == SIGSEGV || sig == SIGBUS) {
        put(" at address ");
        put_hex(reinterpret_cast<std::uintptr_t>(info->si_addr));
    }
    put("; stack (module+offset: addr2line -f -C -e MODULE OFFSET):\n");
    void* frames[64];
    const int n = backtrace(frames, 64);
    for (int i = 0; i < n; ++i) {
        Dl_info d{};
        put("  ");
        if (dladdr(frames[i], &d) != 0 && d.dli_fname) {
            put(d.dli_fname);
            put("+");
            // A return address points past the call: one byte back lands inside it.
            put_hex(reinterpret_cast<std::uintptr_t>(frames[i]) - reinterpret_cast<std::uintptr_t>(d.dli_fbase) -
                    (i > 0 ? 1 : 0));
        } else {
            put_hex(reinterpret_cast<std::uintptr_t>(frames[i]));
        }
        put("\n");
    }
    // The default action now: the process ends with the signal, as it would have.
    std::signal(sig, SIG_DFL);
    ::raise(sig);
}

}  // namespace

void install_crash_report(const char* name, void (*before)()) {
    g_name = name ? name : "aff";
    g_before = before;
    void* warm[1];
    (void)backtrace(warm, 1);
    // The handler runs on its own stack: a stack overflow is a SIGSEGV with no stack left.
    static char alt[64 * 1024];
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = sizeof alt;
    sigaltstack(&ss, nullptr);
    struct sigaction sa{};
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &sa, nullptr);
}

}  // namespace aff
