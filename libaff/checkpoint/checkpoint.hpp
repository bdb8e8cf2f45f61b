// A Hugging Face checkpoint directory of DeepSeek-V4: config.json plus either one
// model.safetensors or model.safetensors.index.json and its shards, all memory-mapped.
// Every tensor is reachable under its canonical (official) name whatever naming the
// files use (tensor_names.hpp); fused transformers expert tensors are exposed as
// per-expert views. Reading a weight dispatches on its stored dtype: BF16/F16/F32 are
// plain; F8_E4M3 needs a "<prefix>.scale" (E8M0 or F32) over 128x128 blocks; I8 is
// packed FP4 E2M1 (low nibble = even column) with a "<prefix>.scale" per 32 inputs.
// Problems are one aff::Error naming the file and the tensor.
#pragma once

#include "libaff/checkpoint/dtype.hpp"
#include "libaff/checkpoint/safetensors.hpp"
#include "libaff/checkpoint/tensor_reader.hpp"
#include "libaff/core/thread_pool.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace aff {

struct TensorView {
    std::string file;         // the safetensors file holding it
    std::string stored_name;  // the name in that file
    DType dtype = DType::f32;
    std::vector<std::uint64_t> shape;  // as stored (FP4: [N, K/2])
    const std::uint8_t* data = nullptr;
    std::uint64_t nbytes = 0;
};

class Checkpoint final : public TensorReader {
public:
    // Opens dir/config.json and the safetensors file(s); validates the index and
    // every header. The config is returned raw here; libaff/model validates it.
    explicit Checkpoint(const std::string& dir);
    Checkpoint(Checkpoint&&) noexcept;
    ~Checkpoint();

    const std::string& dir() const { return dir_; }
    const std::string& config_path() const { return config_path_; }
    const nlohmann::json& config_json() const { return config_; }
    // What "missing tensor" errors name: the index for sharded checkpoints, else the file.
    const std::string& tensor_source() const { return tensor_source_; }

    bool has(const std::string& name) const override { return tensors_.count(name) != 0; }
    // Throws a format error naming tensor_source() when absent.
    const TensorView& tensor(const std::string& name) const;
    std::vector<std::string> names() const;

    // Dequantised float32 values of a weight whose logical shape must be `shape`
    // (for FP4 the unpacked [N, K]). Throws naming file and tensor on any mismatch.
    std::vector<float> read_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const override;
    // Writes the same values into out (size = product of shape).
    void read_f32_into(const std::string& name, const std::vector<std::uint64_t>& shape, float* out) const;
    // The same with the rows spread over pool (aff-quantize: a whole expert matrix at once).
    void read_f32_into(const std::string& name, const std::vector<std::uint64_t>& shape, float* out,
                       ThreadPool& pool) const;
    void check_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const override;
    std::vector<std::int64_t> read_i64(const std::string& name,
                                       const std::vector<std::uint64_t>& shape) const override;
    std::string file_of(const std::string& name) const override { return tensor(name).file; }
    std::optional<Fp8Stored> fp8_stored(const std::string& name) const override;

private:
    void read_f32_rows(const std::string& name, const std::vector<std::uint64_t>& shape, float* out,
                       ThreadPool* pool) const;
    void add_file(const std::string& file_name, const std::vector<std::string>* expected);
    void add_tensor(const std::string& canonical, TensorView view);

    std::string dir_, config_path_, tensor_source_;
    nlohmann::json config_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::unordered_map<std::string, TensorView> tensors_;
};

// Leaves of a dequantisation, exposed for tests and for backends decoding on the fly.
// FP8 block-scaled: rows x cols E4M3 codes, scale grid ceil(rows/128) x ceil(cols/128).
void dequant_fp8_block(const std::uint8_t* codes, std::uint64_t rows, std::uint64_t cols, const float* scale,
                       float* out);
// FP4: rows x cols/2 packed bytes, scale rows x cols/32.
void dequant_fp4(const std::uint8_t* packed, std::uint64_t rows, std::uint64_t cols, const float* scale,
                 float* out);

}  // namespace aff
