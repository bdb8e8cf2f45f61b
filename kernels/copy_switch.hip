// The copy engine's half of the decode prefetch (contract in copy_switch.hpp): one thread a
// slot; each thread sets its own slot's switch (concurrent sets of one handle would be undefined).
#include "kernels/copy_switch.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {

#if defined(AFF_GPU_IS_CUDA)
namespace {

__global__ void copy_switch_select_kernel(CopySwitchSelect a) {
    const int s = static_cast<int>(dev::thread_x());
    if (s >= a.slots) return;
    const int e = a.slot_expert[s];
    const uint8_t* src = a.slot_source[s];
    const bool engine = e >= 0 && static_cast<unsigned>(e) < a.none && src && a.snapshot[e] == src;
    cudaGraphSetConditional(a.handles[s], engine ? static_cast<unsigned>(e) : a.none);
    if (engine) {
        a.slot_source[s] = nullptr;
        if (a.counter) dev::atomic_add(a.counter, 1u);
    }
}

}  // namespace

bool copy_switch_available() { return true; }

void copy_switch_select(const CopySwitchSelect& a, void* stream) {
    if (a.slots < 1 || a.slots > kCopySwitchMaxSlots) throw_argument("copy_switch_select", "slots must be 1..8");
    if (!a.slot_expert || !a.slot_source || !a.snapshot || a.none == 0) throw_argument("copy_switch_select", "null argument");
    copy_switch_select_kernel<<<dim3(1), dim3(32), 0, static_cast<cudaStream_t>(stream)>>>(a);
    AFF_GPU_CHECK(hipGetLastError());
}

#else

bool copy_switch_available() { return false; }

void copy_switch_select(const CopySwitchSelect&, void*) {
    throw_argument("copy_switch_select", "switch nodes are CUDA's: not in this build");
}

#endif

}  // namespace aff::gpu
