// On-the-fly expert decoding from a container (container_experts.hpp). Per-thread
// scratch (thread_local, grown to the largest matrix seen) keeps the per-call cost to
// the decoding itself: tiny models run thousands of these a token.
#include "libaff/model/container_experts.hpp"

#include "libaff/container/tensor_names.hpp"
#include "libaff/core/error.hpp"
#include "libaff/quant/matrix.hpp"

#include <algorithm>

namespace aff {

ContainerExpertSource::ContainerExpertSource(std::shared_ptr<const Container> container,
                                             std::shared_ptr<const quant::Codebook> codebook,
                                             const ModelConfig& c, int mtp_layers)
    : container_(std::move(container)), codebook_(std::move(codebook)), experts_(c.n_routed_experts) {
    const std::uint64_t I = c.moe_intermediate_size, D = c.hidden_size;
    const int layers = c.num_layers + mtp_layers;
    m_.reserve(static_cast<std::size_t>(layers) * experts_ * 3);
    for (int l = 0; l < layers; ++l)
        for (int e = 0; e < experts_; ++e) {
            const bool draft = l >= c.num_layers;
            const ExpertKey key{draft, static_cast<std::uint32_t>(draft ? l - c.num_layers : l),
                                static_cast<std::uint32_t>(e)};
            const std::string p = expert_prefix(key) + ".";
            m_.push_back(stored_matrix(*container_, codebook_.get(), p + "w1.weight", I, D));
            m_.push_back(stored_matrix(*container_, codebook_.get(), p + "w2.weight", D, I));
            m_.push_back(stored_matrix(*container_, codebook_.get(), p + "w3.weight", I, D));
        }
}

CodebookExperts::Stored ContainerExpertSource::codebook_matrix(int layer, int expert, ExpertMatrix which) const {
    const StoredMatrix& m = m_[(static_cast<std::size_t>(layer) * experts_ + expert) * 3 + static_cast<int>(which)];
    const StorageType type = m.tensor->type;
    if (type != StorageType::TQ2875 && type != StorageType::TQ2875R) return {};
    return {container_->bytes(*m.tensor).data(), type == StorageType::TQ2875R};
}

const quant::Codebook& ContainerExpertSource::codebook() const {
    if (!codebook_) throw_internal("ContainerExpertSource::codebook: the container has no codebook");
    return *codebook_;
}

void ContainerExpertSource::matvec(int layer, int expert, ExpertMatrix which, const float* x, float* y) const {
    const StoredMatrix& m = m_[(static_cast<std::size_t>(layer) * experts_ + expert) * 3 + static_cast<int>(which)];
    thread_local std::vector<float> scratch, scale;
    const StorageType type = m.tensor->type;
    if (type == StorageType::TQ2875 || type == StorageType::TQ2875R) {
        const std::size_t need = quant::matvec_scratch_floats(m.cols);
        if (scratch.size() < need) scratch.resize(need);
        quant::matvec(container_->bytes(*m.tensor), m.rows, m.cols, type == StorageType::TQ2875R, *codebook_, x, y,
                      scratch);
        return;
    }
    if (scratch.size() < m.cols) scratch.resize(m.cols);
    if (scale.size() < m.cols / 32 + 1) scale.resize(m.cols / 32 + 1);
    for (std::uint64_t r = 0; r < m.rows; ++r) {
        decode_stored_row(*container_, codebook_.get(), m, r, scratch.data(), scale.data());
        float acc = 0;
        for (std::uint64_t j = 0; j < m.cols; ++j) acc += scratch[j] * x[j];
        y[r] = acc;
    }
}

}  // namespace aff
