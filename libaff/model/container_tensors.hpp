// The tensors of an .aff container (formats/container.md) seen through TensorReader, so
// load_model_weights reads a container exactly as it reads a checkpoint directory. Dense
// weights decode as the checkpoint's do (F32/F16/BF16 plain; F8_E4M3 with its
// "<prefix>.scale" over 128x128 blocks; FP4 with a scale per 32 inputs, using the
// checkpoint's dequantisers) and codebook-quantised tensors (TQ2875, TQ2875R) through
// libaff/quant with the container's CBOK codebook. Errors name the container and the
// tensor. Routed experts are not read here but decoded on the fly by
// container_experts.hpp.
#pragma once

#include "libaff/checkpoint/config.hpp"
#include "libaff/checkpoint/tensor_reader.hpp"
#include "libaff/container/container.hpp"
#include "libaff/quant/codebook.hpp"

#include <memory>
#include <string>
#include <vector>

namespace aff {

// Whether the container's metadata says role "draft" (formats/container.md §5).
bool is_draft_container(const Container& container);
// The model config the container's metadata carries; throws format naming `path` when it has
// none or it is no DeepSeek-V4 config.
ModelConfig container_model_config(const Container& container, const std::string& path);

// The container's codebook (section CBOK) parsed and checked, or nullptr when it has
// none. Container::open has already checked it against the metadata's codebook_id.
std::shared_ptr<const quant::Codebook> container_codebook(const Container& container);

// Bytes of one weight tensor ready to decode row by row: the stored bytes, the logical
// [rows, cols] and, for FP8 and FP4, the scale tensor. Validates type, shape and scale;
// throws naming the container and the tensor.
struct StoredMatrix {
    const TensorInfo* tensor = nullptr;
    const TensorInfo* scale = nullptr;  // F8_E4M3: [ceil(rows/128), ceil(cols/128)]; FP4: [rows, cols/32]
    std::uint64_t rows = 0, cols = 0;
    bool fp4 = false;                   // FP4_E2M1 [rows, cols] or I8 [rows, cols/2]
};
StoredMatrix stored_matrix(const Container& container, const quant::Codebook* codebook, const std::string& name,
                           std::uint64_t rows, std::uint64_t cols);

// Decodes row r of a stored matrix into out[cols]. `scale_scratch` holds at least
// cols/32 + 1 floats (the row's decoded scales).
void decode_stored_row(const Container& container, const quant::Codebook* codebook, const StoredMatrix& m,
                       std::uint64_t r, float* out, float* scale_scratch);

class ContainerTensorReader final : public TensorReader {
public:
    explicit ContainerTensorReader(std::shared_ptr<const Container> container);
    // A draft container's tensors, decoded with its main container's codebook (a draft
    // records only the codebook's id: formats/container.md §5).
    ContainerTensorReader(std::shared_ptr<const Container> container, std::shared_ptr<const quant::Codebook> codebook);

    const Container& container() const { return *container_; }
    const std::shared_ptr<const quant::Codebook>& codebook() const { return codebook_; }

    bool has(const std::string& name) const override { return container_->find(name) != nullptr; }
    std::vector<float> read_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const override;
    void check_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const override;
    std::vector<std::int64_t> read_i64(const std::string& name,
                                       const std::vector<std::uint64_t>& shape) const override;
    std::string file_of(const std::string&) const override { return container_->path(); }
    std::optional<Fp8Stored> fp8_stored(const std::string& name) const override;

private:
    std::shared_ptr<const Container> container_;
    std::shared_ptr<const quant::Codebook> codebook_;
};

}  // namespace aff
