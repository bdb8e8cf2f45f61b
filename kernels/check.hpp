// AFF_GPU_CHECK(call): every GPU runtime call goes through it, and a failure becomes an
// aff::Error of kind device naming the call, the file and the line (style.md §3). Plain C++,
// so kernels/*.hip launchers and libaff/gpu/*.cpp share it; the error text is looked up in
// libaff/gpu/device.cpp, the one file that talks to the runtime. Kernels never throw.
#pragma once

namespace aff::gpu {

// Throws aff::Error(device): "<call> failed at <file>:<line>: <runtime error name>: <text>".
[[noreturn]] void throw_status(int status, const char* call, const char* file, int line);

inline void check_status(int status, const char* call, const char* file, int line) {
    if (status != 0) throw_status(status, call, file, line);  // 0 is hipSuccess / cudaSuccess
}

// Throws aff::Error(unsupported) for a kernel argument the launcher cannot handle.
[[noreturn]] void throw_argument(const char* kernel, const char* what);

}  // namespace aff::gpu

#define AFF_GPU_CHECK(call) ::aff::gpu::check_status(static_cast<int>(call), #call, __FILE__, __LINE__)
