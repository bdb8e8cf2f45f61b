// KeptSet (kept_set.hpp): the sampler's filters by partial sort (top-k) or by bins.
#include "libaff/runtime/kept_set.hpp"

#include "libaff/runtime/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace aff {
namespace {

constexpr int kBinsPerNat = 32;
constexpr int kBins = kBinsPerNat * 64 + 1;  // 64 nats below the top; the last bin holds the rest
constexpr std::uint16_t kOut = 0xffff;

}  // namespace

bool sampler_before(std::span<const float> l, std::int32_t a, std::int32_t b) {
    const float inf = std::numeric_limits<float>::infinity();
    float la = l[std::size_t(a)], lb = l[std::size_t(b)];
    if (la != la) la = -inf;
    if (lb != lb) lb = -inf;
    if (la != lb) return la > lb;
    return a < b;
}

void KeptSet::build(std::span<const float> logits, const SamplerParams& p) {
    logits_ = logits;
    const std::size_t V = logits.size();
    const float inv_t = 1.0f / p.temperature;
    list_.clear();
    list_weight_.clear();
    total_ = 0;
    binned_ = false;
    const bool top_k = p.top_k > 0 && std::size_t(p.top_k) < V;
    if (top_k) {  // the k largest in order first: the largest is their first
        // Keys with NaN as -infinity once, so the comparisons need no check.
        keys_.resize(V);
        for (std::size_t i = 0; i < V; ++i)
            keys_[i] = logits[i] == logits[i] ? logits[i] : -std::numeric_limits<float>::infinity();
        scratch_.resize(V);
        std::iota(scratch_.begin(), scratch_.end(), 0);
        const float* key = keys_.data();
        std::partial_sort(scratch_.begin(), scratch_.begin() + std::ptrdiff_t(p.top_k), scratch_.end(),
                          [key](std::int32_t a, std::int32_t b) { return key[a] != key[b] ? key[a] > key[b] : a < b; });
    }
    float top = -std::numeric_limits<float>::infinity();
    if (top_k) {
        top = logits[std::size_t(scratch_[0])];
    } else {
        for (float l : logits)
            if (l > top) top = l;  // NaN never compares larger
    }
    if (!(top > -std::numeric_limits<float>::infinity())) {  // nothing has mass
        list_.push_back(0);
        list_weight_.push_back(1.0f);
        total_ = 1.0;
        return;
    }
    if (top == std::numeric_limits<float>::infinity()) {
        // +inf takes all the mass: the kept set is the +inf ids, equally weighted, in id order.
        for (std::size_t i = 0; i < V; ++i)
            if (logits[i] == top) list_.push_back(std::int32_t(i));
        if (p.top_k > 0 && list_.size() > std::size_t(p.top_k)) list_.resize(std::size_t(p.top_k));
        if (p.top_p < 1.0f) {  // equal weights: the smallest prefix reaching the mass
            const std::size_t n = list_.size();
            const std::size_t k = std::max<std::size_t>(1, std::size_t(std::ceil(double(p.top_p) * double(n) - 1e-9)));
            list_.resize(std::min(k, n));
        }
        list_weight_.assign(list_.size(), 1.0f);
        total_ = double(list_.size());
        return;
    }
    auto weight = [&](float l) { return l == l ? std::exp((l - top) * inv_t) : 0.0f; };

    if (top_k) {
        // The k largest in order; the filters after it cut prefixes of them.
        list_.assign(scratch_.begin(), scratch_.begin() + std::ptrdiff_t(p.top_k));
        for (std::int32_t id : list_) list_weight_.push_back(weight(logits[std::size_t(id)]));
        std::size_t keep = list_.size();
        if (p.min_p > 0.0f) {  // relative to the top's weight, 1; the first always stays
            std::size_t j = 1;
            while (j < keep && list_weight_[j] >= p.min_p) ++j;
            keep = j;
        }
        if (p.top_p < 1.0f) {
            double kept = 0, mass = 0;
            for (std::size_t j = 0; j < keep; ++j) kept += list_weight_[j];
            std::size_t j = 0;
            while (j < keep) {
                mass += list_weight_[j];
                ++j;
                if (mass >= double(p.top_p) * kept) break;
            }
            keep = j;
        }
        list_.resize(keep);
        list_weight_.resize(keep);
        for (float w : list_weight_) total_ += w;
        return;
    }

    // No top-k: every id with weight, in bins by how far below the top it is.
    binned_ = true;
    weight_.assign(V, 0.0f);
    bin_.assign(V, kOut);
    mass_.assign(kBins, 0.0);
    for (std::size_t i = 0; i < V; ++i) {
        const float l = logits[i];
        const float w = weight(l);
        if (!(w > 0.0f) || (p.min_p > 0.0f && w < p.min_p)) continue;
        const float d = (top - l) * inv_t * float(kBinsPerNat);
        const int b = d < float(kBins - 1) ? int(d) : kBins - 1;
        weight_[i] = w;
        bin_[i] = std::uint16_t(b);
        mass_[std::size_t(b)] += w;
    }
    if (p.top_p < 1.0f) {
        double kept = 0;
        for (double m : mass_) kept += m;
        const double target = double(p.top_p) * kept;
        double acc = 0;
        int cut = kBins;
        for (int b = 0; b < kBins; ++b) {
            if (mass_[std::size_t(b)] == 0) continue;
            if (acc + mass_[std::size_t(b)] < target) {
                acc += mass_[std::size_t(b)];
                continue;
            }
            // The bin the cut falls in: its ids in order, kept through the one reaching the mass.
            const std::vector<std::int32_t>& ids = sorted_bin(b);
            std::size_t j = 0;
            while (j < ids.size()) {
                acc += weight_[std::size_t(ids[std::size_t(j)])];
                ++j;
                if (acc >= target) break;
            }
            double m = 0;
            for (std::size_t x = 0; x < ids.size(); ++x) {
                const std::size_t id = std::size_t(ids[x]);
                if (x < j) {
                    m += weight_[id];
                } else {
                    weight_[id] = 0.0f;
                    bin_[id] = kOut;
                }
            }
            mass_[std::size_t(b)] = m;
            cut = b;
            break;
        }
        if (cut < kBins) {
            for (std::size_t i = 0; i < V; ++i)
                if (bin_[i] != kOut && bin_[i] > cut) {
                    weight_[i] = 0.0f;
                    bin_[i] = kOut;
                }
            for (int b = cut + 1; b < kBins; ++b) mass_[std::size_t(b)] = 0;
        }
    }
    for (double m : mass_) total_ += m;
}

const std::vector<std::int32_t>& KeptSet::sorted_bin(int b) {
    scratch_.clear();
    for (std::size_t i = 0; i < bin_.size(); ++i)
        if (bin_[i] == b) scratch_.push_back(std::int32_t(i));
    std::sort(scratch_.begin(), scratch_.end(), [&](std::int32_t x, std::int32_t y) { return sampler_before(logits_, x, y); });
    return scratch_;
}

std::int32_t KeptSet::at(double target) {
    if (!binned_) {
        double acc = 0;
        for (std::size_t j = 0; j < list_.size(); ++j) {
            acc += list_weight_[j];
            if (target < acc) return list_[j];
        }
        return list_.back();
    }
    double acc = 0;
    int last = -1;
    for (int b = 0; b < kBins; ++b) {
        if (mass_[std::size_t(b)] == 0) continue;
        last = b;
        if (acc + mass_[std::size_t(b)] <= target) {
            acc += mass_[std::size_t(b)];
            continue;
        }
        const std::vector<std::int32_t>& ids = sorted_bin(b);
        for (std::int32_t id : ids) {
            acc += weight_[std::size_t(id)];
            if (target < acc) return id;
        }
        return ids.back();
    }
    return sorted_bin(last).back();  // rounding ran past the end: the last kept in order
}

void KeptSet::fill(std::vector<float>& out) const {
    out.assign(logits_.size(), 0.0f);
    if (!binned_) {
        for (std::size_t j = 0; j < list_.size(); ++j) out[std::size_t(list_[j])] = float(double(list_weight_[j]) / total_);
        return;
    }
    for (std::size_t i = 0; i < weight_.size(); ++i)
        if (weight_[i] > 0.0f) out[i] = float(double(weight_[i]) / total_);
}

}  // namespace aff
