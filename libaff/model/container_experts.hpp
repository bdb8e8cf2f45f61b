// Routed experts decoded on the fly from an .aff container's memory map: the CPU path
// for quantised containers, where materialising every expert as float32 is what a
// quantised container exists to avoid. TQ2875/TQ2875R matrices go through
// quant::matvec with the container's codebook; experts stored unquantised (F32, F16,
// BF16, F8_E4M3, FP4) are decoded a row at a time. Every matrix the config calls for is
// found and checked (type, shape, scales, codebook) when the source is built, so a bad
// container fails at load with the tensor's name, not mid-generation. matvec is safe
// from any number of threads and allocates nothing once a thread has run its first one.
// It also offers the stored bytes of codebook-quantised experts (CodebookExperts), so the
// GPU model uploads them as they are and multiplies them at 2.875 bits a weight.
#pragma once

#include "libaff/container/container.hpp"
#include "libaff/model/codebook_experts.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/weights.hpp"

#include <memory>
#include <vector>

namespace aff {

class ContainerExpertSource final : public ExpertSource, public CodebookExperts {
public:
    // Experts of the config's main layers and of the first `mtp_layers` MTP layers
    // (ExpertSource layer num_layers + i is "mtp.<i>").
    ContainerExpertSource(std::shared_ptr<const Container> container, std::shared_ptr<const quant::Codebook> codebook,
                          const ModelConfig& config, int mtp_layers);
    void matvec(int layer, int expert, ExpertMatrix which, const float* x, float* y) const override;
    // The memory-mapped bytes of a TQ2875/TQ2875R matrix; {nullptr} for any other storage.
    Stored codebook_matrix(int layer, int expert, ExpertMatrix which) const override;
    // The container's codebook; throws (internal) when it has none, which only a caller
    // that skipped codebook_matrix's answer can hit.
    const quant::Codebook& codebook() const override;

private:
    std::shared_ptr<const Container> container_;
    std::shared_ptr<const quant::Codebook> codebook_;
    int experts_;
    std::vector<StoredMatrix> m_;  // [layer][expert][3]
};

}  // namespace aff
