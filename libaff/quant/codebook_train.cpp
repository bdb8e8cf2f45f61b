// Lloyd training of the trellis codebook (codebook_train.hpp). Blocks are split into a
// fixed number of shards independent of the thread count, and shard sums are added in
// shard order, so the result is a pure function of the options.
#include "libaff/quant/codebook_train.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/quant/codebook_structure.hpp"
#include "libaff/quant/half.hpp"
#include "libaff/quant/trellis.hpp"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace aff::quant {

namespace {

double unit_open(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

constexpr std::uint64_t kShards = 64;

// The table whose base entries (index w & ~(2^m − 1)) are those of `values`, the other
// entries derived from them by structure m as codebook_structure.hpp defines it.
std::vector<std::uint16_t> impose_structure(const std::vector<std::uint16_t>& values, int m) {
    if (m != 0 && m != 2 && m != 3) throw_usage("sign structure " + std::to_string(m) + " is not one of 0, 2, 3");
    std::vector<std::uint16_t> out(values);
    const unsigned mask = (1u << m) - 1;
    for (std::uint32_t w = 0; m != 0 && w < static_cast<std::uint32_t>(Codebook::kEntries); ++w) {
        const std::uint32_t b = w & ~mask;
        const std::uint32_t e = sign_structured_entry(m, values[2 * b] | std::uint32_t{values[2 * b + 1]} << 16, w);
        out[2 * w] = static_cast<std::uint16_t>(e & 0xffffu);
        out[2 * w + 1] = static_cast<std::uint16_t>(e >> 16);
    }
    return out;
}

}  // namespace

double gaussian_sample(std::uint64_t seed, std::uint64_t index) {
    const std::uint64_t pair = index / 2;
    const std::uint64_t base = splitmix64(seed ^ splitmix64(pair));
    const double u1 = unit_open(splitmix64(base)), u2 = unit_open(splitmix64(base + 1));
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double a = 6.283185307179586 * u2;
    return (index & 1) ? r * std::sin(a) : r * std::cos(a);
}

Codebook train_codebook(const TrainOptions& opt, ThreadPool& pool, const Codebook* start) {
    std::vector<std::uint16_t> values(Codebook::kEntries * Codebook::kDim);
    if (start) {
        values.assign(start->fp16_values().begin(), start->fp16_values().end());
    } else {
        for (std::size_t i = 0; i < values.size(); ++i)
            values[i] = float_to_fp16(static_cast<float>(gaussian_sample(opt.seed + 1000003, i)));
    }
    const int m = opt.structure;
    values = impose_structure(values, m);  // checks m
    const unsigned mask = (1u << m) - 1;
    std::vector<float> data(opt.blocks * kBlockWeights);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(gaussian_sample(opt.seed, i));

    struct Sums {
        std::vector<double> s0, s1, n;
        double error = 0;
    };
    for (int it = 0; it < opt.iterations; ++it) {
        const Codebook cb(values);
        std::vector<Sums> shards(kShards);
        pool.parallel_for(kShards, [&](std::size_t begin, std::size_t end) {
            TrellisScratch scratch;
            std::uint8_t block[kBlockBytes];
            std::uint16_t windows[kBlockSteps];
            for (std::size_t sh = begin; sh < end; ++sh) {
                Sums& s = shards[sh];
                s.s0.assign(Codebook::kEntries, 0);
                s.s1.assign(Codebook::kEntries, 0);
                s.n.assign(Codebook::kEntries, 0);
                for (std::uint64_t b = opt.blocks * sh / kShards; b < opt.blocks * (sh + 1) / kShards; ++b) {
                    const float* x = &data[b * kBlockWeights];
                    encode_block(x, nullptr, cb, scratch, block, opt.encode);
                    block_windows(block, windows);
                    const float scale = block_scale(block);
                    for (int t = 0; t < kBlockSteps; ++t) {
                        const double y0 = x[2 * t] / scale, y1 = x[2 * t + 1] / scale;
                        s.s0[windows[t]] += y0;
                        s.s1[windows[t]] += y1;
                        s.n[windows[t]] += 1;
                        const double d0 = x[2 * t] - scale * cb.coord0()[windows[t]];
                        const double d1 = x[2 * t + 1] - scale * cb.coord1()[windows[t]];
                        s.error += d0 * d0 + d1 * d1;
                    }
                }
            }
        });
        double error = 0;
        std::vector<double> s0(Codebook::kEntries, 0), s1(Codebook::kEntries, 0), n(Codebook::kEntries, 0);
        for (const Sums& s : shards) {
            error += s.error;
            for (int e = 0; e < Codebook::kEntries; ++e) {
                s0[e] += s.s0[e];
                s1[e] += s.s1[e];
                n[e] += s.n[e];
            }
        }
        if (m != 0) {
            // Fold every window's sums into its base entry (index w & ~mask), undoing the
            // window's transform: the sign flips first, then the swap. Negating a sum
            // negates each term exactly, so this equals summing the un-flipped targets.
            for (unsigned w = 0; w < static_cast<unsigned>(Codebook::kEntries); ++w) {
                const unsigned b = w & ~mask;
                if (w == b) continue;
                double a0 = (w & 1) ? -s0[w] : s0[w], a1 = (w & 2) ? -s1[w] : s1[w];
                if (m == 3 && (w & 4)) std::swap(a0, a1);
                s0[b] += a0;
                s1[b] += a1;
                n[b] += n[w];
            }
        }
        for (unsigned e = 0; e < static_cast<unsigned>(Codebook::kEntries); e += mask + 1) {
            if (n[e] == 0) continue;  // an entry nobody chose keeps its value
            values[2 * e] = float_to_fp16(static_cast<float>(s0[e] / n[e]));
            values[2 * e + 1] = float_to_fp16(static_cast<float>(s1[e] / n[e]));
        }
        values = impose_structure(values, m);
        if (opt.on_iteration) opt.on_iteration(it, error / static_cast<double>(data.size()));
    }
    return Codebook(values);
}

}  // namespace aff::quant
