// Whole-array copies between host and device, poisoned output buffers and expert tables for
// experts laid out one after another, for the code that
// holds kernels to their CPU twins: aff-gpucheck (gpucheck.cpp), the shared kernel cases
// (kernel_cases.cpp) and the device tests (tests/gpu/device_test.hpp). Synchronous (through a
// temporary stream). GPU builds only.
#pragma once

#include "libaff/gpu/device.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace aff::gpu {

// A device copy of v, never empty (16 bytes at least): a kernel takes a null pointer as "absent".
template <class T>
Buffer to_device(const std::vector<T>& v) {
    Buffer b(std::max<std::size_t>(v.size() * sizeof(T), 16));
    if (!v.empty()) upload(b, v.data(), v.size() * sizeof(T));
    return b;
}
inline Buffer to_device(std::span<const std::uint8_t> v) {
    Buffer b(std::max<std::size_t>(v.size(), 16));
    if (!v.empty()) upload(b, v.data(), v.size());
    return b;
}

// The first n elements of b.
template <class T>
std::vector<T> to_host(const Buffer& b, std::size_t n) {
    std::vector<T> v(n);
    download(v.data(), b, n * sizeof(T));
    return v;
}

// A device buffer of n elements of `elem` bytes, every byte 0xff (NaN as floats, −1 as
// integers), so an element a kernel never writes fails its comparison.
inline Buffer poisoned(std::size_t n, std::size_t elem = sizeof(float)) {
    Buffer b(std::max<std::size_t>(n * elem, 16));
    Stream s;
    s.fill(b.data(), 0xff, n * elem);
    s.synchronize();
    return b;
}

// An expert table (moe_gemv_routed, moe_gemm) on the device for `count` experts that lie
// `stride` bytes apart from `first` on: entry e is first + e · stride.
inline Buffer expert_table(const void* first, std::size_t stride, int count) {
    std::vector<const std::uint8_t*> t(std::max(count, 0));
    for (int e = 0; e < count; ++e) t[e] = static_cast<const std::uint8_t*>(first) + std::size_t(e) * stride;
    return to_device(t);
}

}  // namespace aff::gpu
