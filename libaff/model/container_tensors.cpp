// Reading weights out of an .aff container (container_tensors.hpp). The leaves of the
// FP8 and FP4 decoding are the checkpoint's (dequant_fp8_block, dequant_fp4), applied a
// row at a time; trellis rows go through libaff/quant's reference decoder.
#include "libaff/model/container_tensors.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/checkpoint/dtype.hpp"
#include "libaff/checkpoint/safetensors.hpp"
#include "libaff/core/error.hpp"
#include "libaff/quant/matrix.hpp"
#include "libaff/quant/rotation.hpp"

#include <cstring>

namespace aff {

namespace {

[[noreturn]] void tensor_error(const Container& c, const std::string& name, const std::string& what) {
    throw_format("tensor " + name + ": " + what, c.path());
}

// "layers.0.attn.wq_a.weight" -> "layers.0.attn.wq_a.scale", as in checkpoints.
std::string scale_name(const std::string& weight) {
    constexpr std::string_view w = ".weight";
    if (weight.ends_with(w)) return weight.substr(0, weight.size() - w.size()) + ".scale";
    return weight + ".scale";
}


std::string type_name(StorageType t) { return std::string(to_string(t)); }

void decode_plain(StorageType type, const std::uint8_t* p, std::uint64_t n, float* out) {
    switch (type) {
        case StorageType::F32: std::memcpy(out, p, n * 4); return;
        case StorageType::BF16:
            for (std::uint64_t i = 0; i < n; ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, p + 2 * i, 2);
                out[i] = bf16_to_f32(bits);
            }
            return;
        case StorageType::F16:
            for (std::uint64_t i = 0; i < n; ++i) {
                std::uint16_t bits;
                std::memcpy(&bits, p + 2 * i, 2);
                out[i] = f16_to_f32(bits);
            }
            return;
        default: throw_internal("decode_plain: not a plain float type");
    }
}

bool is_plain_float(StorageType t) { return t == StorageType::F32 || t == StorageType::BF16 || t == StorageType::F16; }

}  // namespace

bool is_draft_container(const Container& container) {
    const auto role = container.metadata().find("role");
    return role != container.metadata().end() && *role == "draft";
}

ModelConfig container_model_config(const Container& container, const std::string& path) {
    const nlohmann::json* config_json = container.config();
    if (!config_json) throw_format("metadata has no config (the model's config.json)", path);
    return with_context("metadata config", [&] { return parse_model_config(*config_json, path); });
}

std::shared_ptr<const quant::Codebook> container_codebook(const Container& c) {
    auto bytes = c.codebook();
    if (!bytes) return nullptr;
    try {
        return std::make_shared<const quant::Codebook>(quant::Codebook::parse(*bytes, "section CBOK"));
    } catch (Error& e) {
        e.set_path_if_empty(c.path());
        throw;
    }
}

StoredMatrix stored_matrix(const Container& c, const quant::Codebook* codebook, const std::string& name,
                           std::uint64_t rows, std::uint64_t cols) {
    const TensorInfo* t = c.find(name);
    if (!t) throw_format("missing tensor " + name, c.path());
    StoredMatrix m;
    m.tensor = t;
    m.rows = rows;
    m.cols = cols;
    const std::vector<std::uint64_t> logical{rows, cols};
    auto expect_shape = [&](const std::vector<std::uint64_t>& stored) {
        if (t->shape != stored)
            tensor_error(c, name, "shape " + shape_string(t->shape) + ", expected " + shape_string(stored));
    };
    auto find_scale = [&](const std::vector<std::uint64_t>& shape) {
        const std::string sn = scale_name(name);
        const TensorInfo* s = c.find(sn);
        if (!s) tensor_error(c, name, type_name(t->type) + " weight without its scale tensor " + sn);
        if (s->type != StorageType::F8_E8M0 && s->type != StorageType::F32)
            tensor_error(c, sn, "scale type " + type_name(s->type) + ", expected F8_E8M0 or F32");
        if (s->shape != shape)
            tensor_error(c, sn, "shape " + shape_string(s->shape) + ", expected " + shape_string(shape));
        return s;
    };
    switch (t->type) {
        case StorageType::F32:
        case StorageType::F16:
        case StorageType::BF16: expect_shape(logical); break;
        case StorageType::F8_E4M3:
            expect_shape(logical);
            m.scale = find_scale({(rows + 127) / 128, (cols + 127) / 128});
            break;
        case StorageType::FP4_E2M1:
        case StorageType::I8:
            if (cols % 32 != 0)
                tensor_error(c, name, "FP4 needs columns a multiple of 32, expected " + shape_string(logical));
            expect_shape(t->type == StorageType::I8 ? std::vector<std::uint64_t>{rows, cols / 2} : logical);
            m.fp4 = true;
            m.scale = find_scale({rows, cols / 32});
            break;
        case StorageType::TQ2875:
        case StorageType::TQ2875R:
            expect_shape(logical);
            if (!codebook)
                tensor_error(c, name, "stored as " + type_name(t->type) + " but the container has no codebook (CBOK)");
            if (t->type == StorageType::TQ2875R && !quant::rotation_supported(cols))
                tensor_error(c, name, "TQ2875R needs a power-of-two column count, not " + std::to_string(cols));
            break;
        default: tensor_error(c, name, "storage type " + type_name(t->type) + " is not a float weight");
    }
    return m;
}

void decode_stored_row(const Container& c, const quant::Codebook* codebook, const StoredMatrix& m, std::uint64_t r,
                       float* out, float* scale_scratch) {
    const TensorInfo& t = *m.tensor;
    const std::uint8_t* data = c.bytes(t).data();
    auto scales = [&](std::uint64_t scale_row, std::uint64_t n) {
        const std::uint8_t* s = c.bytes(*m.scale).data();
        if (m.scale->type == StorageType::F32) {
            std::memcpy(scale_scratch, s + scale_row * n * 4, n * 4);
        } else {
            for (std::uint64_t i = 0; i < n; ++i) scale_scratch[i] = e8m0_to_f32(s[scale_row * n + i]);
        }
        return scale_scratch;
    };
    switch (t.type) {
        case StorageType::F32: decode_plain(t.type, data + r * m.cols * 4, m.cols, out); return;
        case StorageType::F16:
        case StorageType::BF16: decode_plain(t.type, data + r * m.cols * 2, m.cols, out); return;
        case StorageType::F8_E4M3:
            dequant_fp8_block(data + r * m.cols, 1, m.cols, scales(r / 128, (m.cols + 127) / 128), out);
            return;
        case StorageType::FP4_E2M1:
        case StorageType::I8: dequant_fp4(data + r * (m.cols / 2), 1, m.cols, scales(r, m.cols / 32), out); return;
        case StorageType::TQ2875:
        case StorageType::TQ2875R: {
            const std::size_t stride = quant::row_bytes(m.cols);
            quant::dequantize_row(std::span(data + r * stride, stride), m.cols, t.type == StorageType::TQ2875R,
                                  *codebook, out);
            return;
        }
        default: throw_internal("decode_stored_row: type not validated by stored_matrix");
    }
}

ContainerTensorReader::ContainerTensorReader(std::shared_ptr<const Container> container)
    : container_(std::move(container)), codebook_(container_codebook(*container_)) {}

ContainerTensorReader::ContainerTensorReader(std::shared_ptr<const Container> container,
                                             std::shared_ptr<const quant::Codebook> codebook)
    : container_(std::move(container)), codebook_(std::move(codebook)) {}

std::vector<float> ContainerTensorReader::read_f32(const std::string& name,
                                                   const std::vector<std::uint64_t>& shape) const {
    const Container& c = *container_;
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> out(n);
    if (shape.size() != 2) {
        check_f32(name, shape);
        const TensorInfo* t = c.find(name);
        decode_plain(t->type, c.bytes(*t).data(), n, out.data());
        return out;
    }
    const StoredMatrix m = stored_matrix(c, codebook_.get(), name, shape[0], shape[1]);
    std::vector<float> scale(shape[1] / 32 + 1);
    for (std::uint64_t r = 0; r < shape[0]; ++r)
        decode_stored_row(c, codebook_.get(), m, r, out.data() + r * shape[1], scale.data());
    return out;
}

void ContainerTensorReader::check_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const {
    const Container& c = *container_;
    if (shape.size() == 2) {
        stored_matrix(c, codebook_.get(), name, shape[0], shape[1]);
        return;
    }
    const TensorInfo* t = c.find(name);
    if (!t) throw_format("missing tensor " + name, c.path());
    if (!is_plain_float(t->type))
        tensor_error(c, name, "storage type " + type_name(t->type) + ", expected F32, F16 or BF16");
    if (t->shape != shape) tensor_error(c, name, "shape " + shape_string(t->shape) + ", expected " + shape_string(shape));
}

std::optional<Fp8Stored> ContainerTensorReader::fp8_stored(const std::string& name) const {
    const Container& c = *container_;
    const TensorInfo* t = c.find(name);
    if (!t || t->type != StorageType::F8_E4M3 || t->shape.size() != 2) return std::nullopt;
    const std::string sn = scale_name(name);
    const TensorInfo* s = c.find(sn);
    if (!s || s->type != StorageType::F8_E8M0) return std::nullopt;
    const std::vector<std::uint64_t> grid{(t->shape[0] + 127) / 128, (t->shape[1] + 127) / 128};
    if (s->shape != grid) tensor_error(c, sn, "shape " + shape_string(s->shape) + ", expected " + shape_string(grid));
    const auto codes = c.bytes(*t), scales = c.bytes(*s);
    return Fp8Stored{codes.data(), scales.data(), codes.size(), scales.size()};
}

std::vector<std::int64_t> ContainerTensorReader::read_i64(const std::string& name,
                                                          const std::vector<std::uint64_t>& shape) const {
    const Container& c = *container_;
    const TensorInfo* t = c.find(name);
    if (!t) throw_format("missing tensor " + name, c.path());
    if (t->type != StorageType::I64 && t->type != StorageType::I32)
        tensor_error(c, name, "storage type " + type_name(t->type) + ", expected I64");
    if (t->shape != shape) tensor_error(c, name, "shape " + shape_string(t->shape) + ", expected " + shape_string(shape));
    const std::uint8_t* p = c.bytes(*t).data();
    std::vector<std::int64_t> out(t->elements());
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (t->type == StorageType::I64) {
            std::memcpy(&out[i], p + 8 * i, 8);
        } else {
            std::int32_t x;
            std::memcpy(&x, p + 4 * i, 4);
            out[i] = x;
        }
    }
    return out;
}

}  // namespace aff
