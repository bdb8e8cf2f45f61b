// The one portability header: aff's kernels and GPU runtime are written against HIP names,
// and this file makes them compile in three settings (style.md §8):
//   1. NVIDIA (AFF_GPU_CUDA, or nvcc): the hip* names used are mapped onto CUDA's, in
//      alphabetical order. ROCm's own HIP-on-CUDA headers do not build against CUDA 13.
//   2. AMD with ROCm installed (AFF_GPU_HIP): ROCm's <hip/hip_runtime.h> is used as is.
//   3. AMD compile check without ROCm (tests/gpu/check_gfx1201.sh: clang -nogpuinc plus
//      clang's own __clang_hip_runtime_wrapper.h): the few runtime declarations that host
//      launchers name are declared here; device code uses only clang builtins. Nothing in
//      this setting is linked or run.
// Kernels read thread and block indices and synchronise only through kernels/device_common.hpp,
// so setting 3 needs no threadIdx. Add a name here only when a kernel or the runtime uses it.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__) || defined(AFF_GPU_CUDA)
#define AFF_GPU_IS_CUDA 1
#include <cuda_runtime.h>

#define hipDeviceProp_t cudaDeviceProp
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipError_t cudaError_t
#define hipEventBlockingSync cudaEventBlockingSync
#define hipEventCreate cudaEventCreate
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDestroy cudaEventDestroy
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEvent_t cudaEvent_t
#define hipFree cudaFree
#define hipGetDevice cudaGetDevice
#define hipGraphDestroy cudaGraphDestroy
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphExec_t cudaGraphExec_t
#define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define hipGraphLaunch cudaGraphLaunch
#define hipGraph_t cudaGraph_t
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipHostFree cudaFreeHost
#define hipHostGetDevicePointer cudaHostGetDevicePointer
#define hipHostMalloc cudaHostAlloc
#define hipHostMallocMapped cudaHostAllocMapped
#define hipHostMallocPortable cudaHostAllocPortable
#define hipMalloc cudaMalloc
#define hipMemGetInfo cudaMemGetInfo
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemcpyDefault cudaMemcpyDefault
#define hipMemcpyPeerAsync cudaMemcpyPeerAsync
#define hipMemsetAsync cudaMemsetAsync
#define hipSetDevice cudaSetDevice
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipStream_t cudaStream_t
#define hipSuccess cudaSuccess

#elif defined(AFF_GPU_HIP) && !defined(AFF_HIP_BARE)
#define AFF_GPU_IS_HIP 1
#include <hip/hip_runtime.h>

#elif defined(__HIP__)
// Setting 3: compile check only. __global__, __device__ and the maths functions come from
// clang's HIP wrapper header; <<<>>> needs the two launch-configuration hooks declared.
#define AFF_GPU_IS_HIP 1
#define AFF_HIP_BARE 1
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
// The block-size bound only (the minimum-blocks hint has no exact AMD equivalent).
#define AFF_LAUNCH_BOUNDS_1(threads) __attribute__((amdgpu_flat_work_group_size(1, threads)))
#define AFF_LAUNCH_BOUNDS_2(threads, blocks) AFF_LAUNCH_BOUNDS_1(threads)
#define AFF_LAUNCH_BOUNDS_PICK(_1, _2, name, ...) name
#define __launch_bounds__(...) AFF_LAUNCH_BOUNDS_PICK(__VA_ARGS__, AFF_LAUNCH_BOUNDS_2, AFF_LAUNCH_BOUNDS_1)(__VA_ARGS__)
struct alignas(8) float2 { float x, y; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
typedef struct ihipStream_t* hipStream_t;
enum hipError_t { hipSuccess = 0 };
extern "C" hipError_t hipGetLastError();
extern "C" hipError_t __hipPushCallConfiguration(dim3 grid, dim3 block, size_t shared = 0,
                                                 hipStream_t stream = nullptr);
extern "C" hipError_t __hipPopCallConfiguration(dim3* grid, dim3* block, size_t* shared,
                                                hipStream_t* stream);

#else
#error "kernels/gpu_compat.hpp: no GPU backend selected (AFF_GPU_CUDA or AFF_GPU_HIP)"
#endif

namespace aff::gpu {
// The logical warp every kernel is written for. RDNA (wave32) and NVIDIA match it; the runtime
// refuses a device whose warp size differs (CDNA's wave64) at start-up (libaff/gpu/device.cpp).
inline constexpr int kWarp = 32;
}  // namespace aff::gpu
