// Device test: kernels/argmax.hip against the greedy pick on the host (greedy_pick.hpp: the
// sampler's temperature 0 and the drafters' plain guesses, the rule the device must copy): random rows of several
// widths (the vocabulary's among them), rows whose maximum is tied at many ids, NaNs at id 0
// and elsewhere, rows all -inf or all NaN, and ±0 ties; ids must be identical, and the copy
// destination must hold the same ids.
#include "device_test.hpp"

#include "libaff/runtime/greedy_pick.hpp"
#include "kernels/argmax.hpp"

#include <cmath>
#include <limits>

using namespace aff::gpu::test;

namespace {

std::int32_t host_pick(std::span<const float> row) { return aff::greedy_pick(row); }

// Rows of `cols` floats shaped by `kind`; row r differs from the others.
std::vector<float> shaped(int rows, int cols, int kind) {
    std::vector<float> x = normal(std::size_t(rows) * cols, 0.0f, 4.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::uniform_int_distribution<int> at(0, cols - 1);
    for (int r = 0; r < rows; ++r) {
        float* row = x.data() + std::size_t(r) * cols;
        switch (kind) {
        case 1:  // the maximum at several ids, the first of them anywhere
            for (int j = 0; j < 1 + r % 5; ++j) row[at(rng())] = 100.0f;
            break;
        case 2:  // quantised values: ties everywhere
            for (int i = 0; i < cols; ++i) row[i] = std::round(row[i]);
            break;
        case 3:  // NaN at id 0: the host keeps 0
            row[0] = nan;
            break;
        case 4:  // NaNs elsewhere, one of them at the maximum's place
            for (int j = 0; j < 3; ++j) row[at(rng())] = nan;
            break;
        case 5:  // all -inf, or -inf with one finite value
            for (int i = 0; i < cols; ++i) row[i] = -inf;
            if (r % 2) row[at(rng())] = -1.0f;
            break;
        case 6:  // all NaN
            for (int i = 0; i < cols; ++i) row[i] = nan;
            break;
        case 7:  // -0 and +0 as the maximum: equal, so the lower id
            for (int i = 0; i < cols; ++i) row[i] = -std::fabs(row[i]) - 1.0f;
            row[at(rng())] = -0.0f;
            row[at(rng())] = 0.0f;
            break;
        case 8:  // +inf at two ids
            row[at(rng())] = inf;
            row[at(rng())] = inf;
            break;
        default:
            break;
        }
    }
    return x;
}

}  // namespace

AFF_DEVICE_TEST("argmax") {
    const int rows_n = 6;
    for (const int cols : {1, 7, 1024, 1031, 129280}) {
        for (int kind = 0; kind <= 8; ++kind) {
            // A stride wider than the row: the rows of a block's logits read in place.
            const long long stride = cols + (kind % 2) * 5;
            std::vector<float> x(std::size_t(rows_n) * std::size_t(stride), 7.0e30f);
            const std::vector<float> rowsv = shaped(rows_n, cols, kind);
            for (int r = 0; r < rows_n; ++r)
                std::copy_n(rowsv.begin() + std::ptrdiff_t(r) * cols, cols, x.begin() + std::ptrdiff_t(r * stride));
            std::vector<std::int32_t> want(rows_n);
            for (int r = 0; r < rows_n; ++r)
                want[std::size_t(r)] = host_pick(std::span<const float>(rowsv).subspan(std::size_t(r) * cols, cols));
            aff::gpu::Buffer dx = to_device(x), dout = poisoned(rows_n, sizeof(int32_t)),
                             dcopy = poisoned(rows_n, sizeof(int32_t));
            aff::gpu::Stream s;
            aff::gpu::argmax_rows(dx.as<float>(), rows_n, cols, stride, dout.as<int32_t>(), s.handle(),
                                  dcopy.as<int32_t>());
            s.synchronize();
            const std::vector<int32_t> got = to_host<int32_t>(dout, rows_n), copy = to_host<int32_t>(dcopy, rows_n);
            std::size_t differ = 0;
            for (int r = 0; r < rows_n; ++r) differ += (got[std::size_t(r)] != want[std::size_t(r)]) +
                                                       (copy[std::size_t(r)] != want[std::size_t(r)]);
            add(rows, "argmax", std::to_string(rows_n) + "x" + std::to_string(cols) + " kind " + std::to_string(kind) +
                                    ": ids differing from the host's pick", double(differ), 0.0);
        }
    }
}
