// Tests for install_crash_report: a real segmentation fault in a child process prints the
// signal, the faulting address and frames as module+offset that name this test binary (what
// addr2line needs), runs the caller's restore hook first, and still ends the child by the
// signal, so exit statuses and core dumps stay the usual ones.
#include "libaff/core/crash_report.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdint>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

volatile std::uintptr_t g_bad_address = 8;  // opaque to the compiler: a real load fault, not a trap it inserts

void restore_hook() {
    const char line[] = "restore hook ran\n";
    (void)::write(STDERR_FILENO, line, sizeof line - 1);
}

// Forks; the child installs the handler, faults, and the parent returns its stderr and status.
std::string crash_child(int& status) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(fds[1], STDERR_FILENO);
        ::close(fds[0]);
        aff::install_crash_report("crash_test", restore_hook);
        *reinterpret_cast<volatile int*>(g_bad_address) = 1;
        ::_exit(0);  // not reached
    }
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, std::size_t(n));
    ::close(fds[0]);
    ::waitpid(pid, &status, 0);
    return out;
}

}  // namespace

TEST_CASE("a segmentation fault prints the signal, the address and module+offset frames", "[core]") {
    int status = 0;
    const std::string out = crash_child(status);
    INFO(out);
    CHECK(out.find("restore hook ran\n") == 0);
    CHECK(out.find("crash_test: crashed with SIGSEGV (segmentation fault) at address 0x8;") != std::string::npos);
    CHECK(out.find("aff_unit_tests+0x") != std::string::npos);  // this binary's frames, offsets for addr2line
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGSEGV);
}
