// The host side of a kernel launch, once for every family: the plain <<<>>> launch and, where
// asked on NVIDIA, the programmatic dependent launch (the kernel may start while the previous
// one in the stream still runs; its code keeps to the rule in device_common.hpp, waiting with
// dev::wait_prerequisites). Elsewhere a dependent launch is a plain one. Errors go through
// AFF_GPU_CHECK (check.hpp).
#pragma once

#include "kernels/check.hpp"
#include "kernels/gpu_compat.hpp"

#include <cstddef>
#include <utility>

namespace aff::gpu {

template <class... Params, class... Args>
void launch_gpu_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                       hipStream_t stream, bool dependent, Args&&... args) {
#if defined(AFF_GPU_IS_CUDA)
    if (dependent) {
        cudaLaunchConfig_t config{};
        config.gridDim = grid;
        config.blockDim = block;
        config.dynamicSmemBytes = shared_bytes;
        config.stream = stream;
        cudaLaunchAttribute attribute{};
        attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attribute.val.programmaticStreamSerializationAllowed = 1;
        config.attrs = &attribute;
        config.numAttrs = 1;
        AFF_GPU_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
        return;
    }
#else
    (void)dependent;
#endif
    kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
