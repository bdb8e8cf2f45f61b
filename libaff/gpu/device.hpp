// The GPU device runtime: which devices aff may use, what they hold, and RAII owners for
// device memory, streams and events. Plain C++ (no runtime headers leak out), so tools and
// tests include it without a GPU compiler; libaff/gpu/device.cpp is the only file that calls
// the HIP/CUDA runtime. Kernels are launched through kernels/<stem>.hpp on a Stream's handle().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace aff::gpu {

struct DeviceInfo {
    int ordinal = 0;          // index among the visible devices
    std::string name;
    int warp_size = 0;
    int multiprocessors = 0;
    int compute_major = 0, compute_minor = 0;
    std::size_t l2_bytes = 0;
    std::size_t total_bytes = 0;
};

struct MemoryInfo {
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
};

// Devices the runtime lets this process see. The runtime itself applies CUDA_VISIBLE_DEVICES
// (NVIDIA) or HIP_VISIBLE_DEVICES (AMD): visible devices are renumbered from 0. Returns 0 when
// there is no device or no driver (never throws for that: callers fall back to the CPU).
int device_count();

DeviceInfo device_info(int ordinal);

// The first `wanted` visible devices (--gpus N); wanted <= 0 means all of them. Throws a
// device error when fewer are visible than asked for, naming both numbers and the variable.
std::vector<int> select_devices(int wanted);

// Makes `ordinal` current for this thread. The first time per device it checks the warp size
// against kWarp (32): a wave64 device is refused with a device error.
void use_device(int ordinal);

// Free and total memory of the current device.
MemoryInfo memory_info();

class Event;

// Device memory owned by one object; moved, never copied.
class Buffer {
public:
    Buffer() = default;
    explicit Buffer(std::size_t bytes);
    ~Buffer();
    Buffer(Buffer&& other) noexcept;
    Buffer& operator=(Buffer&& other) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    void* data() const { return ptr_; }
    std::size_t size() const { return bytes_; }
    template <class T>
    T* as() const { return static_cast<T*>(ptr_); }

private:
    void* ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

// Page-locked host memory mapped into every device's address space (portable): the host
// reads and writes it at data(), kernels read it over the bus at device_data() (what the
// expert table may point at: GpuModel::move_expert). Moved, never copied.
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(std::size_t bytes);
    ~PinnedBuffer();
    PinnedBuffer(PinnedBuffer&& other) noexcept;
    PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;

    void* data() const { return host_; }
    void* device_data() const { return device_; }
    std::size_t size() const { return bytes_; }

private:
    void* host_ = nullptr;
    void* device_ = nullptr;
    std::size_t bytes_ = 0;
};

class Stream {
public:
    Stream();  // a non-blocking stream on the current device
    ~Stream();
    Stream(Stream&& other) noexcept;
    Stream& operator=(Stream&& other) noexcept;
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    // The runtime's stream handle, passed to the kernel launchers (kernels/<stem>.hpp).
    void* handle() const { return handle_; }
    void synchronize() const;

    // Asynchronous copies within or between host and device (direction from the pointers);
    // host memory must stay alive until the stream is synchronised.
    void copy(void* dst, const void* src, std::size_t bytes) const;
    void fill(void* dst, int byte, std::size_t bytes) const;
    // Work queued on this stream after the call waits until `event` completes (an event of
    // any device's stream: how one GPU's work waits for another's).
    void wait(const Event& event) const;

private:
    void* handle_ = nullptr;
};

// Copies `bytes` from src on device src_device to dst on device dst_device, queued on
// `stream` (a stream of dst_device). Peer to peer where the two devices allow it; the runtime
// stages the copy through host memory where they do not (most consumer cards). The same
// device twice is a plain device-to-device copy.
void copy_peer(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes, const Stream& stream);

class Event {
public:
    Event();
    // blocking_sync: synchronize() sleeps until the event instead of spinning on a core (for a
    // thread that waits long while other threads need the cores).
    explicit Event(bool blocking_sync);
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;

    void record(const Stream& stream);
    void synchronize() const;
    // Milliseconds from `start` to this event; both recorded and complete.
    float ms_since(const Event& start) const;

private:
    friend class Stream;
    void* handle_ = nullptr;
};

// A captured sequence of launches on one stream, replayed as one launch (a CUDA/HIP graph):
// the launch overhead of a decode step's hundreds of kernels is paid once, at capture. Whatever
// changes between replays must be read by the kernels from device memory (the launches'
// arguments are frozen at capture). Between begin and end nothing on the stream may wait for
// the host or copy from pageable host memory.
class Graph {
public:
    Graph() = default;
    ~Graph();
    Graph(Graph&& other) noexcept;
    Graph& operator=(Graph&& other) noexcept;
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    // Captures what `record` launches on `stream` and instantiates it (replacing any earlier
    // capture). When record throws, the capture is abandoned, the stream is usable again and
    // the exception propagates.
    template <class Record>
    void capture(const Stream& stream, Record&& record) {
        begin(stream);
        try {
            record();
        } catch (...) {
            abandon(stream);
            throw;
        }
        end(stream);
    }
    void launch(const Stream& stream) const;
    bool empty() const { return exec_ == nullptr; }

private:
    void begin(const Stream& stream);
    void end(const Stream& stream);
    void abandon(const Stream& stream) noexcept;
    void reset() noexcept;
    void* graph_ = nullptr;
    void* exec_ = nullptr;
};

// Synchronous upload/download helpers for tests and tools (through a temporary stream).
void upload(Buffer& dst, const void* src, std::size_t bytes);
void download(void* dst, const Buffer& src, std::size_t bytes);

}  // namespace aff::gpu
