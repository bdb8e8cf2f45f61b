// What the model loader needs from a store of named weights: whether a tensor is there
// and its values as float32 or int64 at the shape the config implies. A checkpoint
// directory (checkpoint.hpp) and an .aff container (libaff/model/container_tensors.hpp)
// both implement it, so load_model_weights is written once for both. Implementations
// throw aff::Error naming the file and the tensor on a missing tensor, a wrong shape or
// a storage type that cannot be read as asked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aff {

class TensorReader {
public:
    virtual ~TensorReader() = default;

    virtual bool has(const std::string& name) const = 0;
    // Dequantised values of a weight whose logical shape must be `shape`.
    virtual std::vector<float> read_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const = 0;
    virtual std::vector<std::int64_t> read_i64(const std::string& name,
                                               const std::vector<std::uint64_t>& shape) const = 0;
    // The file an error about tensor `name`'s values names (the shard holding it, the
    // container), for checks the loader makes on values it has read.
    virtual std::string file_of(const std::string& name) const = 0;
};

}  // namespace aff
