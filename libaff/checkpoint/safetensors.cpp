// Safetensors header parsing with bounds checks on every field (see safetensors.hpp).
#include "libaff/checkpoint/safetensors.hpp"

#include "libaff/core/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

namespace aff {

std::uint64_t SafetensorsTensor::elements() const {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    return n;
}

std::string shape_string(std::span<const std::uint64_t> shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

namespace {
// Largest header we accept; real checkpoints have ~1 MB headers.
constexpr std::uint64_t max_header_bytes = 256ull << 20;

[[noreturn]] void bad_tensor(const std::string& path, const std::string& name, const std::string& what) {
    throw_format("tensor " + name + ": " + what, path);
}

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
    return __builtin_mul_overflow(a, b, &out);
}
}  // namespace

std::vector<SafetensorsTensor> parse_safetensors(std::span<const std::uint8_t> file, const std::string& path) {
    if (file.size() < 8)
        throw_format("not a safetensors file: " + std::to_string(file.size()) + " bytes, shorter than the 8-byte header length", path);
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file[static_cast<std::size_t>(i)];
    if (header_len > file.size() - 8)
        throw_format("header length " + std::to_string(header_len) + " runs past the end of the file (" +
                         std::to_string(file.size()) + " bytes)", path);
    if (header_len > max_header_bytes)
        throw_format("header length " + std::to_string(header_len) + " exceeds the limit of 256 MiB", path);
    const std::uint64_t data_start = 8 + header_len;
    const std::uint64_t data_size = file.size() - data_start;
    const char* text = reinterpret_cast<const char*>(file.data() + 8);
    nlohmann::json header = nlohmann::json::parse(text, text + header_len, nullptr, false);
    if (header.is_discarded()) throw_format("header is not valid JSON", path);
    if (!header.is_object()) throw_format("header is not a JSON object", path);

    std::vector<SafetensorsTensor> out;
    out.reserve(header.size());
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") {
            if (!it->is_object()) throw_format("__metadata__ is not an object", path);
            continue;
        }
        const nlohmann::json& v = *it;
        if (!v.is_object()) bad_tensor(path, name, "entry is not an object");
        SafetensorsTensor t;
        t.name = name;
        auto dt = v.find("dtype");
        if (dt == v.end() || !dt->is_string()) bad_tensor(path, name, "missing dtype");
        auto parsed = parse_dtype(dt->get<std::string>());
        if (!parsed) bad_tensor(path, name, "unsupported dtype " + dt->get<std::string>());
        t.dtype = *parsed;
        auto sh = v.find("shape");
        if (sh == v.end() || !sh->is_array()) bad_tensor(path, name, "missing shape");
        if (sh->size() > 8) bad_tensor(path, name, "shape has more than 8 dimensions");
        std::uint64_t elements = 1;
        for (const auto& d : *sh) {
            if (!d.is_number_unsigned()) bad_tensor(path, name, "shape entry is not a non-negative integer");
            const std::uint64_t dim = d.get<std::uint64_t>();
            t.shape.push_back(dim);
            if (mul_overflows(elements, dim, elements)) bad_tensor(path, name, "shape overflows");
        }
        auto off = v.find("data_offsets");
        if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
            !(*off)[1].is_number_unsigned())
            bad_tensor(path, name, "data_offsets is not a pair of non-negative integers");
        const std::uint64_t begin = (*off)[0].get<std::uint64_t>(), end = (*off)[1].get<std::uint64_t>();
        if (begin > end) bad_tensor(path, name, "data_offsets begin after they end");
        if (end > data_size)
            bad_tensor(path, name, "data [" + std::to_string(begin) + ", " + std::to_string(end) +
                                       ") runs past the end of the data (" + std::to_string(data_size) +
                                       " bytes; file truncated?)");
        std::uint64_t nbytes = 0;
        if (mul_overflows(elements, dtype_size(t.dtype), nbytes)) bad_tensor(path, name, "shape overflows");
        if (nbytes != end - begin)
            bad_tensor(path, name, std::string(dtype_name(t.dtype)) + " " + shape_string(t.shape) + " needs " +
                                       std::to_string(nbytes) + " bytes, data_offsets give " +
                                       std::to_string(end - begin));
        t.offset = data_start + begin;
        t.nbytes = nbytes;
        out.push_back(std::move(t));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
    for (std::size_t i = 1; i < out.size(); ++i)
        if (out[i].offset < out[i - 1].offset + out[i - 1].nbytes)
            bad_tensor(path, out[i].name, "data overlaps tensor " + out[i - 1].name);
    return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
    tensors_ = parse_safetensors(file_.bytes(), path);
    for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace aff
