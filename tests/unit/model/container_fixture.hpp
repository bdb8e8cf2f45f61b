// Test-only: writes a fixture checkpoint's tensors into an .aff container, so the
// container loader can be checked against the checkpoint loader on the same weights.
// Verbatim mode copies every tensor's bytes as stored (the two loaders must then agree
// bit for bit); trellis mode quantises the routed experts' matrices with
// quant::quantize_matrix and the built-in codebook. This is not aff-quantize (which
// makes real containers, with provenance and profiles); it is the smallest writer that
// gives the loader tests their inputs, and hooks let a test damage what it writes.
#pragma once

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/writer.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/matrix.hpp"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aff::test {

enum class ExpertStorage { verbatim, trellis };

struct FixtureContainerOptions {
    ExpertStorage experts = ExpertStorage::verbatim;
    bool codebook_section = true;  // trellis mode: write CBOK
    quant::Rotation rotation = quant::Rotation::automatic;  // trellis mode: TQ2875R where the width allows
    // Return false to leave a tensor out.
    std::function<bool(const std::string& name)> keep = [](const std::string&) { return true; };
    // Applied to the metadata object before it is written.
    std::function<void(nlohmann::json&)> edit_metadata = [](nlohmann::json&) {};
    // Applied to the serialised codebook before it is written (and its id taken).
    std::function<void(std::vector<std::uint8_t>&)> edit_codebook = [](std::vector<std::uint8_t>&) {};
    // Called after the dense tensors, to add more.
    std::function<void(ContainerWriter&)> add_dense = [](ContainerWriter&) {};
};

inline StorageType storage_of(DType d) {
    switch (d) {
        case DType::bf16: return StorageType::BF16;
        case DType::f16: return StorageType::F16;
        case DType::f32: return StorageType::F32;
        case DType::i64: return StorageType::I64;
        case DType::i32: return StorageType::I32;
        case DType::f8_e4m3: return StorageType::F8_E4M3;
        case DType::f8_e8m0: return StorageType::F8_E8M0;
        case DType::i8: return StorageType::I8;
        case DType::u8: return StorageType::U8;
        default: throw std::runtime_error("no storage type for this dtype");
    }
}

inline void write_fixture_container(const std::string& checkpoint_dir, const std::string& out,
                                    const FixtureContainerOptions& opt = {}) {
    const Checkpoint ck(checkpoint_dir);
    const quant::Codebook& cb = quant::Codebook::builtin();
    ContainerWriter w(out);
    nlohmann::json meta{{"config", ck.config_json()}, {"role", "main"}, {"quantiser", nullptr}};
    const bool trellis = opt.experts == ExpertStorage::trellis;
    if (trellis) {
        auto section = cb.serialize();
        opt.edit_codebook(section);
        meta["quantiser"] = {{"test", "container_fixture.hpp"}};
        meta["codebook_id"] = to_hex(xxh3_64(section.data(), section.size()));
        if (opt.codebook_section) w.set_codebook(section);
    }
    opt.edit_metadata(meta);
    w.set_metadata(meta);

    std::map<ExpertKey, std::vector<std::string>> experts;
    std::vector<std::string> dense;
    for (const std::string& name : ck.names()) {
        if (!opt.keep(name)) continue;
        if (auto key = expert_of_tensor(name)) experts[*key].push_back(name);
        else dense.push_back(name);
    }
    ThreadPool pool(2);
    auto copy = [&](const std::string& name) {
        const TensorView& v = ck.tensor(name);
        const bool expert_weight = expert_of_tensor(name) && name.ends_with(".weight");
        if (trellis && expert_of_tensor(name)) {
            if (!expert_weight) return;  // FP4 scales are folded into the quantised weights
            const std::uint64_t rows = v.shape[0], cols = v.dtype == DType::i8 ? v.shape[1] * 2 : v.shape[1];
            const std::vector<float> values = ck.read_f32(name, {rows, cols});
            std::vector<std::uint8_t> bytes(quant::matrix_bytes(rows, cols));
            quant::MatrixOptions mo;
            mo.rotation = opt.rotation;
            const bool rotated = quant::quantize_matrix(values, rows, cols, {}, mo, cb, pool, bytes);
            w.add_tensor(name, rotated ? StorageType::TQ2875R : StorageType::TQ2875, {rows, cols}, bytes);
            return;
        }
        w.add_tensor(name, storage_of(v.dtype), v.shape, {v.data, v.nbytes});
    };
    for (const std::string& name : dense) copy(name);
    opt.add_dense(w);
    for (const auto& [key, names] : experts) {
        w.begin_expert(key);
        for (const std::string& name : names) copy(name);
        w.end_expert();
    }
    w.finish();
}

}  // namespace aff::test
