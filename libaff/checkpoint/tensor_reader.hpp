// What the model loader needs from a store of named weights: whether a tensor is there
// and its values as float32 or int64 at the shape the config implies. A checkpoint
// directory (checkpoint.hpp) and an .aff container (libaff/model/container_tensors.hpp)
// both implement it, so load_model_weights is written once for both. Implementations
// throw aff::Error naming the file and the tensor on a missing tensor, a wrong shape or
// a storage type that cannot be read as asked. A backend that multiplies FP8 weights as
// stored (the GPU's fp8_gemv) asks fp8_stored for their bytes instead of their values, so
// a container's FP8 dense weights reach it as a checkpoint's do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace aff {

// The stored bytes of a weight kept as FP8 E4M3 with E8M0 scales over 128x128 blocks.
struct Fp8Stored {
    const std::uint8_t* codes = nullptr;   // rows x cols E4M3, row-major
    const std::uint8_t* scales = nullptr;  // ceil(rows/128) x ceil(cols/128) E8M0
    std::uint64_t code_bytes = 0, scale_bytes = 0;
};

class TensorReader {
public:
    virtual ~TensorReader() = default;

    virtual bool has(const std::string& name) const = 0;
    // Dequantised values of a weight whose logical shape must be `shape`.
    virtual std::vector<float> read_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const = 0;
    // The checks read_f32 makes (presence, storage, shape, scale tensors, codebook)
    // without decoding a value: validating a whole model costs no weight reads.
    virtual void check_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const = 0;
    virtual std::vector<std::int64_t> read_i64(const std::string& name,
                                               const std::vector<std::uint64_t>& shape) const = 0;
    // The file an error about tensor `name`'s values names (the shard holding it, the
    // container), for checks the loader makes on values it has read.
    virtual std::string file_of(const std::string& name) const = 0;
    // Weight `name`'s bytes when it is stored as F8_E4M3 with an F8_E8M0 "<prefix>.scale";
    // nullopt for any other storage (F32 scales included) or an absent tensor. The bytes
    // stay valid as long as the reader.
    virtual std::optional<Fp8Stored> fp8_stored(const std::string& name) const = 0;
};

}  // namespace aff
