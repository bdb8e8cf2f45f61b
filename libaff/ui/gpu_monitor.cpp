// GPU readings through NVML or ROCm SMI, loaded with dlopen (see gpu_monitor.hpp). The
// few entry points used are declared here with the C types of the libraries' public
// headers (opaque handles, plain structs), so neither header is needed to build.
#include "libaff/ui/gpu_monitor.hpp"

#include <dlfcn.h>

#include <cstdint>

namespace aff::ui {
namespace {

// A dlopen handle closed on destruction.
class Library {
public:
    explicit Library(const std::string& name) : handle_(::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
    ~Library() {
        if (handle_) ::dlclose(handle_);
    }
    Library(const Library&) = delete;
    Library& operator=(const Library&) = delete;
    bool loaded() const { return handle_ != nullptr; }
    template <class Fn>
    bool get(const char* symbol, Fn& fn) const {
        fn = reinterpret_cast<Fn>(::dlsym(handle_, symbol));
        return fn != nullptr;
    }

private:
    void* handle_;
};

// ---- NVML (nvml.h: return 0 = NVML_SUCCESS)
using NvmlDevice = void*;
struct NvmlUtilization {
    unsigned int gpu, memory;
};
struct NvmlMemory {
    unsigned long long total, free, used;
};
constexpr int nvml_clock_sm = 1, nvml_clock_mem = 2;

class NvmlMonitor final : public GpuMonitor {
public:
    explicit NvmlMonitor(const std::string& name) : lib_(name) {}
    ~NvmlMonitor() override {
        if (started_ && shutdown_) shutdown_();
    }

    bool start() {
        if (!lib_.loaded()) return false;
        if (!lib_.get("nvmlInit_v2", init_) || !lib_.get("nvmlShutdown", shutdown_) ||
            !lib_.get("nvmlDeviceGetCount_v2", count_) || !lib_.get("nvmlDeviceGetHandleByIndex_v2", handle_))
            return false;
        lib_.get("nvmlDeviceGetName", name_);
        lib_.get("nvmlDeviceGetUtilizationRates", utilisation_);
        lib_.get("nvmlDeviceGetMemoryInfo", memory_);
        lib_.get("nvmlDeviceGetPowerUsage", power_);
        lib_.get("nvmlDeviceGetClockInfo", clock_);
        if (init_() != 0) return false;
        started_ = true;
        unsigned int n = 0;
        if (count_(&n) != 0) return false;
        for (unsigned int i = 0; i < n; ++i) {
            NvmlDevice d = nullptr;
            if (handle_(i, &d) == 0) devices_.push_back(d);
        }
        return true;
    }

    std::string library() const override { return "NVML"; }

    std::vector<GpuFigures> sample() override {
        std::vector<GpuFigures> out;
        for (std::size_t i = 0; i < devices_.size(); ++i) {
            NvmlDevice d = devices_[i];
            GpuFigures g;
            char name[96] = {};
            g.name = name_ && name_(d, name, sizeof name - 1) == 0 ? std::string(name) : "GPU " + std::to_string(i);
            NvmlUtilization u{};
            if (utilisation_ && utilisation_(d, &u) == 0) g.utilisation_pct = u.gpu;
            NvmlMemory m{};
            if (memory_ && memory_(d, &m) == 0) {
                g.memory_used_bytes = double(m.used);
                g.memory_total_bytes = double(m.total);
            }
            unsigned int mw = 0;
            if (power_ && power_(d, &mw) == 0) g.power_w = mw / 1000.0;
            unsigned int mhz = 0;
            if (clock_ && clock_(d, nvml_clock_sm, &mhz) == 0) g.sm_clock_mhz = mhz;
            if (clock_ && clock_(d, nvml_clock_mem, &mhz) == 0) g.memory_clock_mhz = mhz;
            out.push_back(std::move(g));
        }
        return out;
    }

private:
    Library lib_;
    bool started_ = false;
    std::vector<NvmlDevice> devices_;
    int (*init_)() = nullptr;
    int (*shutdown_)() = nullptr;
    int (*count_)(unsigned int*) = nullptr;
    int (*handle_)(unsigned int, NvmlDevice*) = nullptr;
    int (*name_)(NvmlDevice, char*, unsigned int) = nullptr;
    int (*utilisation_)(NvmlDevice, NvmlUtilization*) = nullptr;
    int (*memory_)(NvmlDevice, NvmlMemory*) = nullptr;
    int (*power_)(NvmlDevice, unsigned int*) = nullptr;
    int (*clock_)(NvmlDevice, int, unsigned int*) = nullptr;
};

// ---- ROCm SMI (rocm_smi.h: return 0 = RSMI_STATUS_SUCCESS). Clocks are left out: their
// struct changed layout between ROCm releases, and a wrong guess would read garbage.
constexpr int rsmi_mem_type_vram = 0;

class RocmSmiMonitor final : public GpuMonitor {
public:
    explicit RocmSmiMonitor(const std::string& name) : lib_(name) {}
    ~RocmSmiMonitor() override {
        if (started_ && shutdown_) shutdown_();
    }

    bool start() {
        if (!lib_.loaded()) return false;
        if (!lib_.get("rsmi_init", init_) || !lib_.get("rsmi_shut_down", shutdown_) ||
            !lib_.get("rsmi_num_monitor_devices", count_))
            return false;
        lib_.get("rsmi_dev_name_get", name_);
        lib_.get("rsmi_dev_busy_percent_get", busy_);
        lib_.get("rsmi_dev_memory_usage_get", used_);
        lib_.get("rsmi_dev_memory_total_get", total_);
        lib_.get("rsmi_dev_power_ave_get", power_);
        if (init_(0) != 0) return false;
        started_ = true;
        return count_(&devices_) == 0;
    }

    std::string library() const override { return "ROCm SMI"; }

    std::vector<GpuFigures> sample() override {
        std::vector<GpuFigures> out;
        for (std::uint32_t i = 0; i < devices_; ++i) {
            GpuFigures g;
            char name[96] = {};
            g.name = name_ && name_(i, name, sizeof name - 1) == 0 ? std::string(name) : "GPU " + std::to_string(i);
            std::uint32_t busy = 0;
            if (busy_ && busy_(i, &busy) == 0) g.utilisation_pct = busy;
            std::uint64_t used = 0, total = 0;
            if (used_ && total_ && used_(i, rsmi_mem_type_vram, &used) == 0 && total_(i, rsmi_mem_type_vram, &total) == 0) {
                g.memory_used_bytes = double(used);
                g.memory_total_bytes = double(total);
            }
            std::uint64_t microwatts = 0;
            if (power_ && power_(i, 0, &microwatts) == 0) g.power_w = microwatts / 1e6;
            out.push_back(std::move(g));
        }
        return out;
    }

private:
    Library lib_;
    bool started_ = false;
    std::uint32_t devices_ = 0;
    int (*init_)(std::uint64_t) = nullptr;
    int (*shutdown_)() = nullptr;
    int (*count_)(std::uint32_t*) = nullptr;
    int (*name_)(std::uint32_t, char*, std::size_t) = nullptr;
    int (*busy_)(std::uint32_t, std::uint32_t*) = nullptr;
    int (*used_)(std::uint32_t, int, std::uint64_t*) = nullptr;
    int (*total_)(std::uint32_t, int, std::uint64_t*) = nullptr;
    int (*power_)(std::uint32_t, std::uint32_t, std::uint64_t*) = nullptr;
};

}  // namespace

std::unique_ptr<GpuMonitor> GpuMonitor::open_nvml(const std::string& library) {
    auto m = std::make_unique<NvmlMonitor>(library);
    if (!m->start()) return nullptr;
    return m;
}

std::unique_ptr<GpuMonitor> GpuMonitor::open_rocm_smi(const std::string& library) {
    auto m = std::make_unique<RocmSmiMonitor>(library);
    if (!m->start()) return nullptr;
    return m;
}

std::unique_ptr<GpuMonitor> GpuMonitor::open() {
    if (auto m = open_nvml("libnvidia-ml.so.1")) return m;
    if (auto m = open_rocm_smi("librocm_smi64.so.1")) return m;
    return open_rocm_smi("librocm_smi64.so");
}

}  // namespace aff::ui
