// The one file of libaff that calls the HIP/CUDA runtime directly (device.hpp says why).
// Errors become aff::Error of kind device through AFF_GPU_CHECK (check.hpp).
#include "libaff/gpu/device.hpp"

#include "libaff/core/error.hpp"
#include "kernels/check.hpp"

#include "kernels/gpu_compat.hpp"

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace aff::gpu {

void throw_status(int status, const char* call, const char* file, int line) {
    const auto code = static_cast<hipError_t>(status);
    std::string where = file;
    if (const auto slash = where.rfind('/'); slash != std::string::npos) where = where.substr(slash + 1);
    throw Error(ErrorKind::device, std::string(call) + " failed at " + where + ":" + std::to_string(line) +
                                       ": " + hipGetErrorName(code) + ": " + hipGetErrorString(code));
}

void throw_argument(const char* kernel, const char* what) {
    throw Error(ErrorKind::unsupported, std::string(kernel) + ": " + what);
}

namespace {
const char* visibility_variable() {
#if defined(AFF_GPU_IS_CUDA)
    return "CUDA_VISIBLE_DEVICES";
#else
    return "HIP_VISIBLE_DEVICES";
#endif
}
}  // namespace

int device_count() {
    int n = 0;
    if (hipGetDeviceCount(&n) != hipSuccess) {
        (void)hipGetLastError();  // no driver or no device: clear the sticky error, report none
        return 0;
    }
    return n;
}

DeviceInfo device_info(int ordinal) {
    hipDeviceProp_t p{};
    AFF_GPU_CHECK(hipGetDeviceProperties(&p, ordinal));
    DeviceInfo info;
    info.ordinal = ordinal;
    info.name = p.name;
    info.warp_size = p.warpSize;
    info.multiprocessors = p.multiProcessorCount;
    info.compute_major = p.major;
    info.compute_minor = p.minor;
    info.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
    info.total_bytes = p.totalGlobalMem;
    return info;
}

std::vector<int> select_devices(int wanted) {
    const int n = device_count();
    if (wanted <= 0) wanted = n;
    if (n == 0 || wanted > n) {
        const char* var = visibility_variable();
        const char* value = std::getenv(var);
        throw Error(ErrorKind::device, std::to_string(wanted) + " GPU(s) asked for, " + std::to_string(n) +
                                           " visible (" + var + "=" + (value ? value : "<unset>") + ")");
    }
    std::vector<int> out;
    for (int i = 0; i < wanted; ++i) out.push_back(i);
    return out;
}

void use_device(int ordinal) {
    static std::mutex mutex;
    static std::set<int> checked;
    AFF_GPU_CHECK(hipSetDevice(ordinal));
    std::lock_guard<std::mutex> lock(mutex);
    if (checked.count(ordinal)) return;
    const DeviceInfo info = device_info(ordinal);
    if (info.warp_size != kWarp)
        throw Error(ErrorKind::device, "device " + std::to_string(ordinal) + " (" + info.name + ") has warp size " +
                                           std::to_string(info.warp_size) + "; aff's kernels need " +
                                           std::to_string(kWarp));
    checked.insert(ordinal);
}

MemoryInfo memory_info() {
    MemoryInfo m;
    AFF_GPU_CHECK(hipMemGetInfo(&m.free_bytes, &m.total_bytes));
    return m;
}

Buffer::Buffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    const hipError_t status = hipMalloc(&ptr_, bytes);
    if (status != hipSuccess) {
        (void)hipGetLastError();
        ptr_ = nullptr;
        std::size_t free_bytes = 0, total_bytes = 0;
        (void)hipMemGetInfo(&free_bytes, &total_bytes);
        throw Error(ErrorKind::device, "cannot allocate " + std::to_string(bytes) + " bytes of device memory (" +
                                           std::to_string(free_bytes) + " free): " + hipGetErrorString(status));
    }
}

Buffer::~Buffer() {
    if (ptr_) (void)hipFree(ptr_);  // destructors never throw; a failed free is not recoverable
}

Buffer::Buffer(Buffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
    if (this != &other) {
        if (ptr_) (void)hipFree(ptr_);
        ptr_ = std::exchange(other.ptr_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

PinnedBuffer::PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    const hipError_t status = hipHostMalloc(&host_, bytes, hipHostMallocMapped | hipHostMallocPortable);
    if (status != hipSuccess) {
        (void)hipGetLastError();
        host_ = nullptr;
        throw Error(ErrorKind::device, "cannot allocate " + std::to_string(bytes) +
                                           " bytes of mapped pinned host memory: " + hipGetErrorString(status));
    }
    const hipError_t mapped = hipHostGetDevicePointer(&device_, host_, 0);
    if (mapped != hipSuccess) {
        (void)hipGetLastError();
        (void)hipHostFree(host_);
        host_ = nullptr;
        throw Error(ErrorKind::device, std::string("pinned host memory has no device address: ") +
                                           hipGetErrorString(mapped));
    }
}

PinnedBuffer::~PinnedBuffer() {
    if (host_) (void)hipHostFree(host_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : host_(std::exchange(other.host_, nullptr)),
      device_(std::exchange(other.device_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
        if (host_) (void)hipHostFree(host_);
        host_ = std::exchange(other.host_, nullptr);
        device_ = std::exchange(other.device_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

Stream::Stream() {
    hipStream_t s = nullptr;
    AFF_GPU_CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    handle_ = s;
}

Stream::~Stream() {
    if (handle_) (void)hipStreamDestroy(static_cast<hipStream_t>(handle_));
}

Stream::Stream(Stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
    if (this != &other) {
        if (handle_) (void)hipStreamDestroy(static_cast<hipStream_t>(handle_));
        handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
}

void Stream::synchronize() const { AFF_GPU_CHECK(hipStreamSynchronize(static_cast<hipStream_t>(handle_))); }

void Stream::copy(void* dst, const void* src, std::size_t bytes) const {
    AFF_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, static_cast<hipStream_t>(handle_)));
}

void Stream::fill(void* dst, int byte, std::size_t bytes) const {
    AFF_GPU_CHECK(hipMemsetAsync(dst, byte, bytes, static_cast<hipStream_t>(handle_)));
}

void Stream::wait(const Event& event) const {
    AFF_GPU_CHECK(hipStreamWaitEvent(static_cast<hipStream_t>(handle_), static_cast<hipEvent_t>(event.handle_), 0));
}

void copy_peer(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes, const Stream& stream) {
    AFF_GPU_CHECK(hipMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, static_cast<hipStream_t>(stream.handle())));
}

Event::Event() {
    hipEvent_t e = nullptr;
    AFF_GPU_CHECK(hipEventCreate(&e));
    handle_ = e;
}

Event::Event(bool blocking_sync) {
    hipEvent_t e = nullptr;
    if (blocking_sync)
        AFF_GPU_CHECK(hipEventCreateWithFlags(&e, hipEventBlockingSync));
    else
        AFF_GPU_CHECK(hipEventCreate(&e));
    handle_ = e;
}

Event::~Event() {
    if (handle_) (void)hipEventDestroy(static_cast<hipEvent_t>(handle_));
}

void Event::record(const Stream& stream) {
    AFF_GPU_CHECK(hipEventRecord(static_cast<hipEvent_t>(handle_), static_cast<hipStream_t>(stream.handle())));
}

void Event::synchronize() const { AFF_GPU_CHECK(hipEventSynchronize(static_cast<hipEvent_t>(handle_))); }

float Event::ms_since(const Event& start) const {
    float ms = 0.0f;
    AFF_GPU_CHECK(hipEventElapsedTime(&ms, static_cast<hipEvent_t>(start.handle_), static_cast<hipEvent_t>(handle_)));
    return ms;
}

Graph::~Graph() { reset(); }

Graph::Graph(Graph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& other) noexcept {
    if (this != &other) {
        reset();
        graph_ = std::exchange(other.graph_, nullptr);
        exec_ = std::exchange(other.exec_, nullptr);
    }
    return *this;
}

void Graph::reset() noexcept {
    if (exec_) (void)hipGraphExecDestroy(static_cast<hipGraphExec_t>(exec_));
    if (graph_) (void)hipGraphDestroy(static_cast<hipGraph_t>(graph_));
    exec_ = graph_ = nullptr;
}

void Graph::begin(const Stream& stream) {
    reset();
    AFF_GPU_CHECK(hipStreamBeginCapture(static_cast<hipStream_t>(stream.handle()), hipStreamCaptureModeThreadLocal));
}

void Graph::end(const Stream& stream) {
    hipGraph_t g = nullptr;
    AFF_GPU_CHECK(hipStreamEndCapture(static_cast<hipStream_t>(stream.handle()), &g));
    graph_ = g;
    hipGraphExec_t e = nullptr;
    AFF_GPU_CHECK(hipGraphInstantiateWithFlags(&e, g, 0));
    exec_ = e;
}

void Graph::abandon(const Stream& stream) noexcept {
    hipGraph_t g = nullptr;
    (void)hipStreamEndCapture(static_cast<hipStream_t>(stream.handle()), &g);
    if (g) (void)hipGraphDestroy(g);
    (void)hipGetLastError();  // the failed capture's error is not sticky: clear it
}

void Graph::launch(const Stream& stream) const {
    if (!exec_) throw_internal("Graph::launch: nothing captured");
    AFF_GPU_CHECK(hipGraphLaunch(static_cast<hipGraphExec_t>(exec_), static_cast<hipStream_t>(stream.handle())));
}

void upload(Buffer& dst, const void* src, std::size_t bytes) {
    if (bytes > dst.size()) throw_argument("upload", "more bytes than the buffer holds");
    Stream s;
    s.copy(dst.data(), src, bytes);
    s.synchronize();
}

void download(void* dst, const Buffer& src, std::size_t bytes) {
    if (bytes > src.size()) throw_argument("download", "more bytes than the buffer holds");
    Stream s;
    s.copy(dst, src.data(), bytes);
    s.synchronize();
}

}  // namespace aff::gpu
