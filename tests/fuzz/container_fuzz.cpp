// Fuzzes the .aff container reader (libaff/container/container.cpp): any bytes must
// either be refused with aff::Error or open into a container whose every tensor and
// extent lies inside the bytes (so hashing them all, and summarising, is safe). Crashes,
// sanitizer reports and other exception types are bugs.
#include "libaff/container/container.hpp"
#include "libaff/container/digests.hpp"
#include "libaff/container/info.hpp"
#include "libaff/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const aff::Container c = aff::Container::open_bytes({data, size}, "fuzz.aff");
        static aff::ThreadPool pool(1);
        (void)aff::check_tensor_digests(c, pool, aff::null_progress());
        (void)aff::summarize(c);
        for (const aff::ExpertExtent& x : c.experts()) {
            const auto bytes = c.bytes(x);
            if (bytes.data() < data || bytes.data() + bytes.size() > data + size) std::abort();
        }
    } catch (const aff::Error&) {
    }
    return 0;
}
