// Parsers of llama.cpp importance matrices (imatrix.hpp). Both read from one bounds-
// checked cursor, so a truncated or lying file is an error at the first field that
// does not fit, never a read past the end. Limits on counts and lengths keep a hostile
// header from asking for huge allocations.
#include "libaff/quant/imatrix.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/mapped_file.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <regex>

namespace aff::quant {

namespace {

constexpr std::uint64_t kMaxTensors = 1u << 20;
constexpr std::uint64_t kMaxString = 1u << 16;
constexpr std::uint64_t kMaxKv = 1u << 16;
constexpr float kMaxImatrixCount = 9007199254740992.0f;  // 2^53

class Cursor {
public:
    explicit Cursor(std::span<const std::uint8_t> b) : b_(b) {}
    std::size_t pos() const { return pos_; }
    std::size_t size() const { return b_.size(); }
    bool at_end() const { return pos_ == b_.size(); }
    const std::uint8_t* take(std::uint64_t n, const char* what) {
        if (n > b_.size() - pos_)
            throw_format(std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes at offset " +
                         std::to_string(pos_) + ", file has " + std::to_string(b_.size()));
        const std::uint8_t* p = b_.data() + pos_;
        pos_ += n;
        return p;
    }
    template <class T>
    T get(const char* what) {
        T v;
        std::memcpy(&v, take(sizeof v, what), sizeof v);  // little-endian hosts only, as llama.cpp
        return v;
    }
    std::string string(std::uint64_t n, const char* what) {
        if (n > kMaxString) throw_format(std::string(what) + " length " + std::to_string(n) + " is implausible");
        const auto* p = take(n, what);
        return std::string(reinterpret_cast<const char*>(p), n);
    }
    void seek(std::uint64_t p, const char* what) {
        if (p > b_.size()) throw_format(std::string("truncated: ") + what + " starts past the end of the file");
        pos_ = p;
    }
    std::span<const std::uint8_t> bytes() const { return b_; }

private:
    std::span<const std::uint8_t> b_;
    std::size_t pos_ = 0;
};

// GGUF value types.
enum : std::uint32_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

std::uint64_t scalar_size(std::uint32_t t) {
    switch (t) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
    default: return 0;
    }
}

void skip_value(Cursor& c, std::uint32_t type, int depth) {
    if (type == kString) {
        c.string(c.get<std::uint64_t>("string length"), "string");
    } else if (type == kArray) {
        if (depth > 2) throw_format("nested arrays too deep");
        const auto elem = c.get<std::uint32_t>("array type");
        const auto n = c.get<std::uint64_t>("array length");
        if (elem == kString || elem == kArray) {
            if (n > kMaxTensors) throw_format("array of " + std::to_string(n) + " elements is implausible");
            for (std::uint64_t i = 0; i < n; ++i) skip_value(c, elem, depth + 1);
        } else {
            const std::uint64_t sz = scalar_size(elem);
            if (sz == 0) throw_format("unknown value type " + std::to_string(elem));
            if (n > (c.size() - c.pos()) / sz) throw_format("truncated: array of " + std::to_string(n) + " elements");
            c.take(n * sz, "array");
        }
    } else {
        const std::uint64_t sz = scalar_size(type);
        if (sz == 0) throw_format("unknown value type " + std::to_string(type));
        c.take(sz, "value");
    }
}

struct TensorInfo {
    std::vector<std::uint64_t> ne;
    std::uint32_t type = 0;
    std::uint64_t offset = 0;
};

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Imatrix parse_gguf(Cursor& c, const std::string& path) {
    Imatrix im;
    im.path = path;
    c.take(4, "magic");
    const auto version = c.get<std::uint32_t>("version");
    if (version != 2 && version != 3) throw_unsupported("GGUF version " + std::to_string(version) + " (reads 2 and 3)");
    const auto n_tensors = c.get<std::uint64_t>("tensor count");
    const auto n_kv = c.get<std::uint64_t>("key-value count");
    if (n_tensors > kMaxTensors) throw_format("tensor count " + std::to_string(n_tensors) + " is implausible");
    if (n_kv > kMaxKv) throw_format("key-value count " + std::to_string(n_kv) + " is implausible");
    std::uint64_t alignment = 32;
    for (std::uint64_t i = 0; i < n_kv; ++i) {
        const std::string key = c.string(c.get<std::uint64_t>("key length"), "key");
        const auto type = c.get<std::uint32_t>("value type");
        with_context("key " + key, [&] {
            if (key == "general.type") {
                if (type != kString) throw_format("general.type is not a string");
                const std::string v = c.string(c.get<std::uint64_t>("string length"), "general.type");
                if (v != "imatrix") throw_format("not an imatrix (general.type = \"" + v + "\")");
            } else if (key == "general.alignment" && type == kU32) {
                alignment = c.get<std::uint32_t>("general.alignment");
                if (alignment == 0 || (alignment & (alignment - 1)) != 0)
                    throw_format("general.alignment " + std::to_string(alignment) + " is not a power of two");
            } else if ((key == "imatrix.chunk_count" || key == "imatrix.chunk_size") && type == kU32) {
                (key == "imatrix.chunk_count" ? im.chunk_count : im.chunk_size) = c.get<std::uint32_t>(key.c_str());
            } else if (key == "imatrix.datasets" && type == kArray) {
                const auto elem = c.get<std::uint32_t>("array type");
                const auto n = c.get<std::uint64_t>("array length");
                if (elem != kString) throw_format("imatrix.datasets is not an array of strings");
                if (n > kMaxTensors) throw_format("imatrix.datasets has an implausible length");
                for (std::uint64_t j = 0; j < n; ++j)
                    im.datasets.push_back(c.string(c.get<std::uint64_t>("string length"), "dataset"));
            } else {
                skip_value(c, type, 0);
            }
        });
    }
    std::map<std::string, TensorInfo> infos;
    std::vector<std::string> order;
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
        const std::string name = c.string(c.get<std::uint64_t>("tensor name length"), "tensor name");
        with_context("tensor " + name, [&] {
            TensorInfo t;
            const auto dims = c.get<std::uint32_t>("dimension count");
            if (dims == 0 || dims > 4) throw_format("has " + std::to_string(dims) + " dimensions");
            std::uint64_t elements = 1;
            for (std::uint32_t d = 0; d < dims; ++d) {
                t.ne.push_back(c.get<std::uint64_t>("dimension"));
                if (t.ne.back() == 0 || t.ne.back() > (1ull << 32)) throw_format("dimension out of range");
                // Every element is 4 bytes of this file: more than it holds is a lie.
                if (t.ne.back() > c.size() / 4 / elements) throw_format("has more elements than the file has bytes");
                elements *= t.ne.back();
            }
            t.type = c.get<std::uint32_t>("type");
            t.offset = c.get<std::uint64_t>("offset");
            if (t.type != 0) throw_unsupported("type " + std::to_string(t.type) + " (imatrix tensors are F32)");
            if (!infos.emplace(name, t).second) throw_format("appears twice");
            order.push_back(name);
        });
    }
    const std::uint64_t data_start = (c.pos() + alignment - 1) / alignment * alignment;
    auto floats = [&](const std::string& name) {
        const TensorInfo& t = infos.at(name);
        std::uint64_t n = 1;
        for (auto d : t.ne) n *= d;
        if (t.offset > c.size() || data_start > c.size() - t.offset || n > (c.size() - data_start - t.offset) / 4)
            throw_format("tensor " + name + " runs past the end of the file");
        std::vector<float> v(n);
        std::memcpy(v.data(), c.bytes().data() + data_start + t.offset, n * 4);
        for (std::uint64_t k = 0; k < n; ++k)
            if (!std::isfinite(v[k]) || (v[k] < 0 && !ends_with(name, ".in_sum")))
                throw_format("tensor " + name + " value " + std::to_string(k) + " is negative or not finite");
        // Counts are numbers of tokens: past 2^53 they are no count (and would overflow
        // the 64-bit sums an expert profile makes of them).
        if (ends_with(name, ".counts"))
            for (std::uint64_t k = 0; k < n; ++k)
                if (v[k] > kMaxImatrixCount) {
                    char value[32];
                    std::snprintf(value, sizeof value, "%g", static_cast<double>(v[k]));
                    throw_format("tensor " + name + " value " + std::to_string(k) + " is " + value +
                                 ", more than 2^53 tokens");
                }
        return v;
    };
    for (const std::string& name : order) {
        if (!ends_with(name, ".in_sum2")) {
            if (!ends_with(name, ".counts") && !ends_with(name, ".in_sum"))
                throw_format("tensor " + name + " is not an imatrix tensor (.in_sum2, .counts, .in_sum)");
            const std::string base = name.substr(0, name.rfind('.'));
            if (!infos.count(base + ".in_sum2")) throw_format("tensor " + name + " has no " + base + ".in_sum2");
            continue;
        }
        ImatrixEntry e;
        e.name = name.substr(0, name.size() - 8);
        with_context("tensor " + e.name, [&] {
            const TensorInfo& s2 = infos.at(name);
            e.cols = s2.ne[0];
            e.matrices = s2.ne.size() > 1 ? s2.ne[1] : 1;
            if (s2.ne.size() > 2) throw_format("in_sum2 has more than 2 dimensions");
            const auto ci = infos.find(e.name + ".counts");
            if (ci == infos.end()) throw_format("has in_sum2 but no counts");
            std::uint64_t cn = 1;
            for (auto d : ci->second.ne) cn *= d;
            if (cn != e.matrices)
                throw_format("counts has " + std::to_string(cn) + " values for " + std::to_string(e.matrices) +
                             " matrices");
            e.sum2 = floats(name);
            e.counts = floats(e.name + ".counts");
        });
        im.entries.push_back(std::move(e));
    }
    return im;
}

Imatrix parse_dat(Cursor& c, const std::string& path) {
    Imatrix im;
    im.path = path;
    im.legacy = true;
    const auto n = c.get<std::int32_t>("entry count");
    if (n < 1 || static_cast<std::uint64_t>(n) > kMaxTensors)
        throw_format("entry count " + std::to_string(n) + " is not plausible (bad magic or not an imatrix)");
    for (std::int32_t i = 0; i < n; ++i) {
        ImatrixEntry e;
        const auto len = c.get<std::int32_t>("name length");
        if (len < 1 || len > 1024) throw_format("entry " + std::to_string(i) + ": name length " + std::to_string(len));
        e.name = c.string(static_cast<std::uint64_t>(len), "name");
        with_context("tensor " + e.name, [&] {
            e.ncall = c.get<std::int32_t>("ncall");
            const auto nval = c.get<std::int32_t>("nval");
            if (e.ncall < 0) throw_format("ncall " + std::to_string(e.ncall) + " is negative");
            if (nval < 1) throw_format("nval " + std::to_string(nval) + " is not positive");
            const auto* p = c.take(static_cast<std::uint64_t>(nval) * 4, "values");
            e.sum2.resize(static_cast<std::size_t>(nval));
            std::memcpy(e.sum2.data(), p, e.sum2.size() * 4);
            for (std::size_t k = 0; k < e.sum2.size(); ++k)
                if (!std::isfinite(e.sum2[k]) || e.sum2[k] < 0)
                    throw_format("value " + std::to_string(k) + " is negative or not finite");
            e.cols = e.sum2.size();
        });
        im.entries.push_back(std::move(e));
    }
    // Optional trailer: int32 chunk count, int32 length, dataset name.
    if (!c.at_end()) {
        im.chunk_count = static_cast<std::uint32_t>(c.get<std::int32_t>("chunk count"));
        if (!c.at_end()) {
            const auto len = c.get<std::int32_t>("dataset name length");
            if (len < 0) throw_format("dataset name length is negative");
            im.datasets.push_back(c.string(static_cast<std::uint64_t>(len), "dataset name"));
        }
        if (!c.at_end()) throw_format(std::to_string(c.size() - c.pos()) + " trailing bytes after the dataset name");
    }
    return im;
}

}  // namespace

const ImatrixEntry* Imatrix::find(const std::string& name) const {
    for (const auto& e : entries)
        if (e.name == name) return &e;
    return nullptr;
}

std::vector<float> Imatrix::importance(const ImatrixEntry& e, std::size_t expert, std::size_t cols,
                                       std::size_t experts) const {
    return with_context(path, [&] {
        return with_context("tensor " + e.name, [&] {
            std::vector<float> out(cols, 1.0f);
            if (legacy) {
                if (e.sum2.size() != cols * experts)
                    throw_format("has " + std::to_string(e.sum2.size()) + " values, the checkpoint's weight needs " +
                                 std::to_string(cols) + " columns x " + std::to_string(experts) + " matrices");
                const float scale = e.ncall > 0 ? 1.0f / static_cast<float>(e.ncall) : 1.0f;
                for (std::size_t j = 0; j < cols; ++j) out[j] = e.sum2[expert * cols + j] * scale;
                return out;
            }
            if (e.cols != cols || e.matrices != experts)
                throw_format("is " + std::to_string(e.cols) + " columns x " + std::to_string(e.matrices) +
                             " matrices, the checkpoint's weight " + std::to_string(cols) + " x " +
                             std::to_string(experts));
            const float count = e.counts[expert];
            if (count <= 0) return out;  // no data: uniform importance
            for (std::size_t j = 0; j < cols; ++j) out[j] = e.sum2[expert * cols + j] / count;
            return out;
        });
    });
}

Imatrix parse_imatrix(std::span<const std::uint8_t> bytes, const std::string& path) {
    try {
        Cursor c(bytes);
        if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) return parse_gguf(c, path);
        return parse_dat(c, path);
    } catch (Error& e) {
        e.set_path_if_empty(path);
        throw;
    }
}

Imatrix read_imatrix(const std::string& path) {
    MappedFile f(path);
    return parse_imatrix(f.bytes(), path);
}

std::optional<ExpertTensorRef> map_expert_tensor(const std::string& name) {
    static const std::regex re(R"(^blk\.(\d{1,4})\.ffn_(gate|up|gate_up|down)_exps\.weight$)");
    std::smatch m;
    if (!std::regex_match(name, m, re)) return std::nullopt;
    ExpertTensorRef r;
    r.layer = std::stoi(m[1]);
    const std::string kind = m[2];
    r.w1 = kind == "gate" || kind == "gate_up";
    r.w3 = kind == "up" || kind == "gate_up";
    r.w2 = kind == "down";
    return r;
}

std::optional<LlamaTensorMatch> match_llama_tensor(const std::string& name, int trunk_layers) {
    // Block tensors that llama-imatrix can see in a DeepSeek-V4 graph (every weight of a
    // matrix product), by llama.cpp's name (src/llama-arch.cpp) → our name under the
    // layer's prefix (the checkpoint's, as llama.cpp's converter maps it).
    static const std::map<std::string, std::vector<std::string>> kBlock = {
        {"attn_q_a", {"attn.wq_a.weight"}},
        {"attn_q_b", {"attn.wq_b.weight"}},
        {"attn_kv", {"attn.wkv.weight"}},
        {"attn_output_a", {"attn.wo_a.weight"}},
        {"attn_output_b", {"attn.wo_b.weight"}},
        {"attn_compressor_kv", {"attn.compressor.wkv.weight"}},
        {"attn_compressor_gate", {"attn.compressor.wgate.weight"}},
        {"indexer.attn_q_b", {"attn.indexer.wq_b.weight"}},
        {"indexer.proj", {"attn.indexer.weights_proj.weight"}},
        {"indexer_compressor_kv", {"attn.indexer.compressor.wkv.weight"}},
        {"indexer_compressor_gate", {"attn.indexer.compressor.wgate.weight"}},
        {"hc_attn_fn", {"hc_attn_fn"}},
        {"hc_ffn_fn", {"hc_ffn_fn"}},
        {"ffn_gate_inp", {"ffn.gate.weight"}},
        {"ffn_gate_shexp", {"ffn.shared_experts.w1.weight"}},
        {"ffn_up_shexp", {"ffn.shared_experts.w3.weight"}},
        {"ffn_down_shexp", {"ffn.shared_experts.w2.weight"}},
        {"ffn_gate_exps", {"ffn.experts.{e}.w1.weight"}},
        {"ffn_up_exps", {"ffn.experts.{e}.w3.weight"}},
        {"ffn_down_exps", {"ffn.experts.{e}.w2.weight"}},
        {"ffn_gate_up_exps", {"ffn.experts.{e}.w1.weight", "ffn.experts.{e}.w3.weight"}},
    };
    LlamaTensorMatch m;
    if (name == "output.weight") {  // recorded only with llama-imatrix --process-output
        m.ours = {"head.weight"};
        return m;
    }
    static const std::regex re(R"(^blk\.(\d{1,4})\.(.+)\.weight$)");
    std::smatch g;
    if (!std::regex_match(name, g, re)) return std::nullopt;
    m.block = std::stoi(g[1]);
    m.mtp = trunk_layers > 0 && m.block >= trunk_layers;
    const std::string prefix =
        m.mtp ? "mtp." + std::to_string(m.block - trunk_layers) + "." : "layers." + std::to_string(m.block) + ".";
    const std::string rest = g[2];
    if (rest == "nextn.eh_proj") {  // MTP only: [e_proj | h_proj] over the concatenated inputs
        if (!m.mtp) return std::nullopt;
        m.ours = {prefix + "e_proj.weight", prefix + "h_proj.weight"};
        return m;
    }
    const auto it = kBlock.find(rest);
    if (it == kBlock.end()) return std::nullopt;
    for (const auto& ours : it->second) m.ours.push_back(prefix + ours);
    m.experts = map_expert_tensor(name);
    return m;
}

std::string expert_weight_name(int layer, int expert, const char* which) {
    return "layers." + std::to_string(layer) + ".ffn.experts." + std::to_string(expert) + "." + which + ".weight";
}

}  // namespace aff::quant
