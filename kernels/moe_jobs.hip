// Device-built moe_gemv job lists (contract in moe_jobs.hpp): one thread per (list, job).
#include "kernels/moe_jobs.hpp"

#include "aff/gpu/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

struct Lists {
    MoeJobList list[kMoeJobListsMax];
};

__global__ void __launch_bounds__(256) moe_jobs_kernel(const int32_t* __restrict__ ids, int count, Lists lists,
                                                       int list_count) {
    const int i = static_cast<int>(dev::block_x()) * 256 + static_cast<int>(dev::thread_x());
    if (i >= count * list_count) return;
    const MoeJobList& l = lists.list[i / count];
    const int j = i % count;
    MoeGemvJob job;
    job.w = l.stack + static_cast<size_t>(ids[j]) * l.expert_bytes;
    const float* x = l.rotated && l.rotated[ids[j]] ? l.x_rotated : l.x;
    job.x = x + static_cast<size_t>(j / l.x_group) * l.x_stride;
    job.y = l.y + static_cast<size_t>(j) * l.y_stride;
    l.out[j] = job;
}

}  // namespace

void moe_jobs(const int32_t* ids, int count, const MoeJobList* lists, int list_count, void* stream) {
    if (count < 1 || list_count < 1 || list_count > kMoeJobListsMax)
        throw_argument("moe_jobs", "count must be >= 1 and list_count 1..3");
    Lists l{};
    for (int i = 0; i < list_count; ++i) {
        if (lists[i].x_group < 1) throw_argument("moe_jobs", "x_group must be >= 1");
        l.list[i] = lists[i];
    }
    const int total = count * list_count;
    moe_jobs_kernel<<<dim3(static_cast<unsigned>((total + 255) / 256)), dim3(256), 0, static_cast<hipStream_t>(stream)>>>(
        ids, count, l, list_count);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
