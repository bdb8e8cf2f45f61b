// Per-GPU readings for the live view: utilisation, memory, power and clocks, from the
// driver's management library loaded at run time (dlopen): NVML (libnvidia-ml.so.1) on
// NVIDIA, ROCm SMI (librocm_smi64.so) on AMD. Nothing links against either: a machine
// without them, or a library that fails to start, gives a monitor that reports nothing,
// and the view hides its GPU panel. The run never fails because of it.
#pragma once

#include "libaff/ui/stats.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aff::ui {

class GpuMonitor {
public:
    virtual ~GpuMonitor() = default;
    // "NVML", "ROCm SMI"
    virtual std::string library() const = 0;
    // One entry per GPU; a figure the driver does not report stays -1.
    virtual std::vector<GpuFigures> sample() = 0;

    // NVML, then ROCm SMI, by their usual names; nothing when neither loads and starts.
    static std::unique_ptr<GpuMonitor> open();
    // One library by path or name (tests load a fake NVML from the build tree).
    static std::unique_ptr<GpuMonitor> open_nvml(const std::string& library);
    static std::unique_ptr<GpuMonitor> open_rocm_smi(const std::string& library);
};

}  // namespace aff::ui
