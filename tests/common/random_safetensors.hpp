// A writer of random safetensors checkpoints for tests that need a model of a given geometry
// without committing one: the random tiny model of the serve tests (tests/serve/
// make_random_model.cpp) and the wide random checkpoint of the GPU container test
// (tests/gpu/container_forward_test.cpp). Values come from splitmix64 (core/hash.hpp), fixed
// and the same on every platform (std::uniform_real_distribution is not), so a checkpoint is a
// pure function of its seed and the calls made. Header-only: both are single-file programs.
#pragma once

#include "libaff/core/atomic_file.hpp"
#include "libaff/core/hash.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace aff::test {

class RandomSafetensors {
public:
    explicit RandomSafetensors(std::uint64_t seed) : s_(seed) {}

    std::uint64_t next() { return aff::splitmix64_mix(s_ += aff::kSplitmix64Gamma); }
    float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) / float(1 << 24); }

    // BF16 values uniform in [centre - spread, centre + spread] (rounded to nearest even).
    void bf16(const std::string& name, std::vector<std::uint64_t> shape, float centre, float spread) {
        std::uint64_t n = 1;
        for (auto d : shape) n *= d;
        Tensor t{name, "BF16", std::move(shape), std::string(n * 2, '\0')};
        for (std::uint64_t i = 0; i < n; ++i) {
            const float f = centre + uniform(-spread, spread);
            std::uint32_t u;
            std::memcpy(&u, &f, 4);
            const std::uint16_t b = std::uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
            std::memcpy(&t.bytes[i * 2], &b, 2);
        }
        tensors_.push_back(std::move(t));
    }
    // A BF16 matrix whose products have about unit variance for unit inputs.
    void matrix(const std::string& name, int rows, int cols) {
        bf16(name, {std::uint64_t(rows), std::uint64_t(cols)}, 0.0f, std::sqrt(3.0f / float(cols)));
    }
    // An FP8 linear `<stem>.weight` with its `<stem>.scale`: E4M3 codes with exponent field
    // 1..8 (magnitudes 2^-6 .. 3.75, RMS about 1) and E8M0 scales per 128 x 128 block near
    // 1/sqrt(cols), one in two blocks halved, so products stay O(1).
    void matrix_fp8(const std::string& weight, int rows, int cols) {
        Tensor t{weight, "F8_E4M3", {std::uint64_t(rows), std::uint64_t(cols)},
                 std::string(std::size_t(rows) * cols, '\0')};
        for (char& c : t.bytes) {
            const std::uint64_t r = next();
            c = char(((r & 1) << 7) | ((1 + (r >> 1) % 8) << 3) | ((r >> 8) & 7));
        }
        tensors_.push_back(std::move(t));
        const int br = (rows + 127) / 128, bc = (cols + 127) / 128;
        const int base = 127 - int(std::lround(std::log2(std::sqrt(double(cols)))));
        Tensor s{weight.substr(0, weight.size() - 7) + ".scale", "F8_E8M0",
                 {std::uint64_t(br), std::uint64_t(bc)}, std::string(std::size_t(br) * bc, '\0')};
        for (char& c : s.bytes) c = char(base - int(next() & 1));
        tensors_.push_back(std::move(s));
    }
    // A routed expert's FP4 linear `<stem>.weight` (I8 [rows, cols/2], two E2M1 codes a byte, the
    // even column in the low nibble) with its `<stem>.scale` (F8_E8M0 [rows, cols/32]): uniform
    // codes (value RMS about 2.9) and scales near 1 / (2.9 sqrt(cols)), one in two halved, so
    // products stay O(1). cols must be a multiple of 32.
    void matrix_fp4(const std::string& weight, int rows, int cols) {
        Tensor t{weight, "I8", {std::uint64_t(rows), std::uint64_t(cols / 2)},
                 std::string(std::size_t(rows) * (cols / 2), '\0')};
        for (char& c : t.bytes) c = char(next() & 0xFF);
        tensors_.push_back(std::move(t));
        const int base = 127 - int(std::lround(std::log2(2.9 * std::sqrt(double(cols)))));
        Tensor s{weight.substr(0, weight.size() - 7) + ".scale", "F8_E8M0",
                 {std::uint64_t(rows), std::uint64_t(cols / 32)}, std::string(std::size_t(rows) * (cols / 32), '\0')};
        for (char& c : s.bytes) c = char(base - int(next() & 1));
        tensors_.push_back(std::move(s));
    }
    // A hash layer's table: token id -> k distinct experts of `experts`, as I64.
    void tid2eid(const std::string& name, int vocab, int k, int experts) {
        Tensor t{name, "I64", {std::uint64_t(vocab), std::uint64_t(k)}, std::string(std::size_t(vocab) * k * 8, '\0')};
        std::vector<std::int64_t> chosen(k);
        for (int r = 0; r < vocab; ++r) {
            for (int j = 0; j < k; ++j) {
                std::int64_t e;
                bool repeat;
                do {
                    e = std::int64_t(next() % std::uint64_t(experts));
                    repeat = false;
                    for (int i = 0; i < j; ++i) repeat = repeat || chosen[i] == e;
                } while (repeat);
                chosen[j] = e;
            }
            std::memcpy(&t.bytes[std::size_t(r) * k * 8], chosen.data(), std::size_t(k) * 8);
        }
        tensors_.push_back(std::move(t));
    }

    // dir/model.safetensors and dir/config.json (config as given), each written atomically.
    void save_checkpoint(const std::string& dir, const nlohmann::json& config) const {
        std::filesystem::create_directories(dir);
        save(dir + "/model.safetensors");
        aff::AtomicFile c(dir + "/config.json");
        const std::string text = config.dump(2) + "\n";
        c.write(text.data(), text.size());
        c.commit();
    }

    // path: the .safetensors file, written atomically.
    void save(const std::string& path) const {
        nlohmann::json header = nlohmann::json::object();
        std::uint64_t offset = 0;
        for (const Tensor& t : tensors_) {
            header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
            offset += t.bytes.size();
        }
        header["__metadata__"] = {{"format", "pt"}};
        std::string text = header.dump();
        text.append((8 - text.size() % 8) % 8, ' ');
        const std::uint64_t size = text.size();
        aff::AtomicFile out(path);
        out.write(&size, 8);
        out.write(text.data(), text.size());
        for (const Tensor& t : tensors_) out.write(t.bytes.data(), t.bytes.size());
        out.commit();
    }

    struct Tensor {
        std::string name, dtype;
        std::vector<std::uint64_t> shape;
        std::string bytes;
    };
    // What has been written so far, in order, and a tensor made elsewhere (a re-save under other
    // names: tests/common/transformers_checkpoint.hpp).
    const std::vector<Tensor>& tensors() const { return tensors_; }
    void put(Tensor t) { tensors_.push_back(std::move(t)); }

private:
    std::uint64_t s_;
    std::vector<Tensor> tensors_;
};

}  // namespace aff::test
