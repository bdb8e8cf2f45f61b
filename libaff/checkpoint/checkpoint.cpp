// Opening HF checkpoint directories and decoding their tensors (see checkpoint.hpp).
#include "libaff/checkpoint/checkpoint.hpp"

#include "libaff/checkpoint/tensor_names.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/mapped_file.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

namespace fs = std::filesystem;

namespace aff {

namespace {
nlohmann::json read_json(const std::string& path) {
    MappedFile f(path);
    const char* text = reinterpret_cast<const char*>(f.data());
    nlohmann::json j = nlohmann::json::parse(text, text + f.size(), nullptr, false);
    if (j.is_discarded()) throw_format("not valid JSON", path);
    if (!j.is_object()) throw_format("not a JSON object", path);
    return j;
}

std::uint64_t product(const std::vector<std::uint64_t>& s) {
    std::uint64_t n = 1;
    for (auto d : s) n *= d;
    return n;
}

std::string describe(const TensorView& v, const std::string& canonical) {
    return v.stored_name == canonical ? "tensor " + canonical : "tensor " + v.stored_name + " (" + canonical + ")";
}

[[noreturn]] void tensor_error(const TensorView& v, const std::string& canonical, const std::string& what) {
    throw_format(describe(v, canonical) + ": " + what, v.file);
}

// "layers.0.attn.wq_a.weight" -> "layers.0.attn.wq_a.scale"
std::string scale_name(const std::string& weight) {
    constexpr std::string_view w = ".weight";
    if (weight.ends_with(w)) return weight.substr(0, weight.size() - w.size()) + ".scale";
    return weight + ".scale";
}

void check_scale(const TensorView& s, const std::string& canonical, const std::vector<std::uint64_t>& shape) {
    if (s.shape != shape)
        tensor_error(s, canonical, "shape " + shape_string(s.shape) + ", expected " + shape_string(shape));
    if (s.dtype != DType::f8_e8m0 && s.dtype != DType::f32)
        tensor_error(s, canonical, "scale dtype " + std::string(dtype_name(s.dtype)) + ", expected F8_E8M0 or F32");
}

std::vector<float> read_scale(const TensorView& s, const std::string& canonical,
                              const std::vector<std::uint64_t>& shape) {
    check_scale(s, canonical, shape);
    std::vector<float> out(product(shape));
    if (s.dtype == DType::f8_e8m0) {
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = e8m0_to_f32(s.data[i]);
    } else {
        std::memcpy(out.data(), s.data, out.size() * 4);
    }
    return out;
}
}  // namespace

void dequant_fp8_block(const std::uint8_t* codes, std::uint64_t rows, std::uint64_t cols, const float* scale,
                       float* out) {
    float lut[256];
    for (int i = 0; i < 256; ++i) lut[i] = e4m3_to_f32(static_cast<std::uint8_t>(i));
    const std::uint64_t scale_cols = (cols + 127) / 128;
    for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < cols; ++c)
            out[r * cols + c] = lut[codes[r * cols + c]] * scale[(r / 128) * scale_cols + c / 128];
}

void dequant_fp4(const std::uint8_t* packed, std::uint64_t rows, std::uint64_t cols, const float* scale,
                 float* out) {
    float lut[16];  // e2m1_to_f32 of each code, looked up instead of called per weight
    for (int i = 0; i < 16; ++i) lut[i] = e2m1_to_f32(static_cast<std::uint8_t>(i));
    for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < cols; c += 2) {
            const std::uint8_t b = packed[r * (cols / 2) + c / 2];
            const float s = scale[r * (cols / 32) + c / 32];
            out[r * cols + c] = lut[b & 0xf] * s;
            out[r * cols + c + 1] = lut[b >> 4] * s;
        }
}

Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
    std::error_code ec;
    const fs::file_status st = fs::status(dir, ec);
    // A path that is not there says so as every other tool does (cannot open: No such file...).
    if (ec) throw_errno("cannot open", dir, ec.value());
    if (!fs::is_directory(st)) throw_io("not a checkpoint directory", dir);
    config_path_ = (fs::path(dir) / "config.json").string();
    if (!fs::exists(config_path_)) throw_io("missing config.json", dir);
    config_ = read_json(config_path_);
    const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
    const std::string single_path = (fs::path(dir) / "model.safetensors").string();
    if (fs::exists(index_path)) {
        tensor_source_ = index_path;
        const nlohmann::json index = read_json(index_path);
        auto wm = index.find("weight_map");
        if (wm == index.end() || !wm->is_object()) throw_format("no weight_map object", index_path);
        std::map<std::string, std::vector<std::string>> by_file;
        for (auto it = wm->begin(); it != wm->end(); ++it) {
            if (!it->is_string()) throw_format("weight_map entry " + it.key() + " is not a file name", index_path);
            const std::string file = it->get<std::string>();
            if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
                throw_format("weight_map entry " + it.key() + ": shard name '" + file + "' is not a plain file name",
                             index_path);
            by_file[file].push_back(it.key());
        }
        if (by_file.empty()) throw_format("weight_map is empty", index_path);
        for (const auto& [file, names] : by_file) {
            if (!fs::exists(fs::path(dir) / file))
                throw_io("missing shard " + file + " (listed for tensor " + names.front() + ")", index_path);
            add_file(file, &names);
        }
    } else if (fs::exists(single_path)) {
        tensor_source_ = single_path;
        add_file("model.safetensors", nullptr);
    } else {
        throw_io("no model.safetensors or model.safetensors.index.json", dir);
    }
}

void Checkpoint::add_file(const std::string& file_name, const std::vector<std::string>* expected) {
    const std::string path = (fs::path(dir_) / file_name).string();
    files_.push_back(std::make_unique<SafetensorsFile>(path));
    const SafetensorsFile& f = *files_.back();
    if (expected)
        for (const std::string& name : *expected)
            if (!f.find(name))
                throw_format("tensor " + name + ": listed in model.safetensors.index.json but absent from the shard",
                             path);
    for (const SafetensorsTensor& t : f.tensors()) {
        TensorView v{path, t.name, t.dtype, t.shape, f.data(t), t.nbytes};
        const CanonicalName c = canonical_tensor_name(t.name);
        if (c.kind == CanonicalName::Kind::plain) {
            add_tensor(c.name, std::move(v));
            continue;
        }
        // Fused transformers experts: gate_up_proj [E, 2I, D] (w1 rows, then w3 rows), down_proj [E, D, I].
        if (t.shape.size() != 3)
            throw_format("tensor " + t.name + ": shape " + shape_string(t.shape) + ", expected 3 dimensions", path);
        if (t.dtype == DType::f8_e4m3 || t.dtype == DType::i8)
            throw_unsupported("tensor " + t.name + ": quantised fused expert tensors are not supported", path);
        const std::uint64_t E = t.shape[0], rows = t.shape[1], cols = t.shape[2];
        const std::uint64_t esize = dtype_size(t.dtype);
        if (c.kind == CanonicalName::Kind::fused_gate_up && rows % 2 != 0)
            throw_format("tensor " + t.name + ": shape " + shape_string(t.shape) + ", gate_up rows must be even", path);
        for (std::uint64_t e = 0; e < E; ++e) {
            const std::uint8_t* base = f.data(t) + e * rows * cols * esize;
            const std::string p = c.name + std::to_string(e) + ".";
            if (c.kind == CanonicalName::Kind::fused_gate_up) {
                const std::uint64_t half = rows / 2, bytes = half * cols * esize;
                add_tensor(p + "w1.weight", {path, t.name, t.dtype, {half, cols}, base, bytes});
                add_tensor(p + "w3.weight", {path, t.name, t.dtype, {half, cols}, base + bytes, bytes});
            } else {
                add_tensor(p + "w2.weight", {path, t.name, t.dtype, {rows, cols}, base, rows * cols * esize});
            }
        }
    }
}

void Checkpoint::add_tensor(const std::string& canonical, TensorView view) {
    auto [it, inserted] = tensors_.emplace(canonical, view);
    if (!inserted && !(it->second.stored_name == view.stored_name && it->second.file == view.file))
        throw_format("tensor " + view.stored_name + " and tensor " + it->second.stored_name + " (" +
                         it->second.file + ") both name " + canonical, view.file);
}

const TensorView& Checkpoint::tensor(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw_format("missing tensor " + name, tensor_source_);
    return it->second;
}

std::vector<std::string> Checkpoint::names() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : tensors_) out.push_back(k);
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<float> Checkpoint::read_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const {
    std::vector<float> out(product(shape));
    read_f32_into(name, shape, out.data());
    return out;
}

void Checkpoint::read_f32_into(const std::string& name, const std::vector<std::uint64_t>& shape, float* out) const {
    read_f32_rows(name, shape, out, nullptr);
}

void Checkpoint::read_f32_into(const std::string& name, const std::vector<std::uint64_t>& shape, float* out,
                               ThreadPool& pool) const {
    read_f32_rows(name, shape, out, &pool);
}

void Checkpoint::read_f32_rows(const std::string& name, const std::vector<std::uint64_t>& shape, float* out,
                               ThreadPool* pool) const {
    // fn(begin, end) over [0, n) in parts of `unit`, on the pool when there is one. Each
    // value depends only on its own code and scale, so the parts do not change the result.
    auto each = [&](std::uint64_t n, std::uint64_t unit, const std::function<void(std::uint64_t, std::uint64_t)>& fn) {
        const std::uint64_t units = (n + unit - 1) / unit;
        if (!pool) return fn(0, n);
        pool->parallel_for(units, [&](std::size_t b, std::size_t e) { fn(b * unit, std::min<std::uint64_t>(e * unit, n)); });
    };
    check_f32(name, shape);
    const TensorView& v = tensor(name);
    const std::uint64_t n = product(shape);
    switch (v.dtype) {
        case DType::f32:
            each(n, 1 << 16, [&](std::uint64_t b, std::uint64_t e) { std::memcpy(out + b, v.data + 4 * b, (e - b) * 4); });
            return;
        case DType::bf16:
        case DType::f16: {
            each(n, 1 << 16, [&](std::uint64_t b, std::uint64_t e) {
                for (std::uint64_t i = b; i < e; ++i) {
                    std::uint16_t bits;
                    std::memcpy(&bits, v.data + 2 * i, 2);
                    out[i] = v.dtype == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
                }
            });
            return;
        }
        case DType::f8_e4m3: {
            const std::string sn = scale_name(name);
            const std::vector<float> scale =
                read_scale(tensor(sn), sn, {(shape[0] + 127) / 128, (shape[1] + 127) / 128});
            const std::uint64_t scale_cols = (shape[1] + 127) / 128;
            each(shape[0], 128, [&](std::uint64_t b, std::uint64_t e) {  // whole scale rows
                dequant_fp8_block(v.data + b * shape[1], e - b, shape[1], scale.data() + b / 128 * scale_cols,
                                  out + b * shape[1]);
            });
            return;
        }
        case DType::i8: {
            const std::string sn = scale_name(name);
            const std::vector<float> scale = read_scale(tensor(sn), sn, {shape[0], shape[1] / 32});
            each(shape[0], 16, [&](std::uint64_t b, std::uint64_t e) {
                dequant_fp4(v.data + b * (shape[1] / 2), e - b, shape[1], scale.data() + b * (shape[1] / 32),
                            out + b * shape[1]);
            });
            return;
        }
        default: return;  // check_f32 refused it
    }
}

void Checkpoint::check_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const {
    const TensorView& v = tensor(name);
    auto check_shape = [&](const std::vector<std::uint64_t>& stored_expected) {
        if (v.shape != stored_expected)
            tensor_error(v, name, "shape " + shape_string(v.shape) + ", expected " + shape_string(stored_expected));
    };
    switch (v.dtype) {
        case DType::f32:
        case DType::bf16:
        case DType::f16: check_shape(shape); return;
        case DType::f8_e4m3: {
            check_shape(shape);
            if (shape.size() != 2) tensor_error(v, name, "F8_E4M3 weight must be 2-dimensional");
            const std::string sn = scale_name(name);
            if (!has(sn)) tensor_error(v, name, "F8_E4M3 weight without its scale tensor " + sn);
            check_scale(tensor(sn), sn, {(shape[0] + 127) / 128, (shape[1] + 127) / 128});
            return;
        }
        case DType::i8: {
            if (shape.size() != 2 || shape[1] % 32 != 0)
                tensor_error(v, name, "packed FP4 needs a 2-dimensional shape with columns a multiple of 32, expected " +
                                          shape_string(shape));
            check_shape({shape[0], shape[1] / 2});
            const std::string sn = scale_name(name);
            if (!has(sn)) tensor_error(v, name, "packed FP4 weight without its scale tensor " + sn);
            check_scale(tensor(sn), sn, {shape[0], shape[1] / 32});
            return;
        }
        default:
            tensor_error(v, name, "dtype " + std::string(dtype_name(v.dtype)) + " is not a float weight");
    }
}

std::optional<Fp8Stored> Checkpoint::fp8_stored(const std::string& name) const {
    const auto it = tensors_.find(name);
    if (it == tensors_.end() || it->second.dtype != DType::f8_e4m3 || it->second.shape.size() != 2) return std::nullopt;
    const TensorView& v = it->second;
    const std::string sn = scale_name(name);
    const auto s = tensors_.find(sn);
    if (s == tensors_.end() || s->second.dtype != DType::f8_e8m0) return std::nullopt;
    const std::vector<std::uint64_t> grid{(v.shape[0] + 127) / 128, (v.shape[1] + 127) / 128};
    if (s->second.shape != grid)
        tensor_error(s->second, sn, "shape " + shape_string(s->second.shape) + ", expected " + shape_string(grid));
    return Fp8Stored{v.data, s->second.data, v.nbytes, s->second.nbytes};
}

std::vector<std::int64_t> Checkpoint::read_i64(const std::string& name, const std::vector<std::uint64_t>& shape) const {
    const TensorView& v = tensor(name);
    if (v.dtype != DType::i64 && v.dtype != DType::i32)
        tensor_error(v, name, "dtype " + std::string(dtype_name(v.dtype)) + ", expected I64");
    if (v.shape != shape) tensor_error(v, name, "shape " + shape_string(v.shape) + ", expected " + shape_string(shape));
    std::vector<std::int64_t> out(product(shape));
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (v.dtype == DType::i64) {
            std::memcpy(&out[i], v.data + 8 * i, 8);
        } else {
            std::int32_t x;
            std::memcpy(&x, v.data + 4 * i, 4);
            out[i] = x;
        }
    }
    return out;
}

}  // namespace aff
