// One part of GpuModel::Impl (forward_impl.hpp): the step profile's marks
// (GpuModel::profile_decode). While profiling, the forward records an event at the start of
// each op class and layer; the time between two marks is the first one's. Private to the GPU
// forward.
#pragma once

#include "libaff/gpu/device.hpp"

#include <memory>
#include <vector>

namespace aff::gpu::fwd {

struct StepMarks {
    struct Mark {
        const char* what;
        int layer;  // -1: outside the layers (embedding, head, hand-over)
        std::unique_ptr<Event> event;
    };
    bool profiling = false;
    int layer = -1;  // the layer the next marks belong to
    std::vector<Mark> marks;

    void mark(const char* what, const Stream& stream) {
        if (!profiling) return;
        marks.push_back({what, layer, std::make_unique<Event>()});
        marks.back().event->record(stream);
    }
};

}  // namespace aff::gpu::fwd
