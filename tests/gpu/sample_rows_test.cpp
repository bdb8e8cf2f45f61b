// Device test: kernels/sample_rows.hip against the host's account of the draw (tests/common/
// tempered_draw.hpp, double precision): rows of several widths (the vocabulary's among them)
// and temperatures, each row drawn by a grid of uniforms; every id must be the host's but
// where u lies within rounding of a running-sum boundary, and never an id of q 0; q's rows
// against the host's softmax; NaN and -inf entries never drawn, an all -inf row gives id 0,
// a draw just under 1 gives an id of the row; the copy destination holds the same ids.
#include "device_test.hpp"
#include "../common/tempered_draw.hpp"

#include "kernels/sample_rows.hpp"

#include <cmath>
#include <limits>

using namespace aff::gpu::test;

namespace {

constexpr int kDraws = 96;  // uniforms a row

void check_rows(const std::string& what, const std::vector<float>& row, float temperature, std::vector<Row>& rows) {
    const int cols = int(row.size());
    std::vector<float> x, u;
    for (int r = 0; r < kDraws; ++r) {
        x.insert(x.end(), row.begin(), row.end());
        u.push_back(r == kDraws - 1 ? std::nextafter(1.0f, 0.0f) : (float(r) + 0.37f) / float(kDraws));
    }
    aff::gpu::Buffer dx = to_device(x), du = to_device(u), dout = poisoned(kDraws, sizeof(int32_t)),
                     dcopy = poisoned(kDraws, sizeof(int32_t)), dq = poisoned(std::size_t(kDraws) * cols, sizeof(float));
    aff::gpu::Stream s;
    aff::gpu::sample_rows(dx.as<float>(), kDraws, cols, cols, temperature, du.as<float>(), dout.as<int32_t>(),
                          dq.as<float>(), s.handle(), dcopy.as<int32_t>());
    s.synchronize();
    const std::vector<int32_t> got = to_host<int32_t>(dout, kDraws), copy = to_host<int32_t>(dcopy, kDraws);
    const std::vector<float> q = to_host<float>(dq, std::size_t(kDraws) * cols);
    const std::vector<double> want_q = aff::test::tempered_softmax(row, temperature);
    std::size_t unexplained = 0, zero_mass = 0, copies = 0;
    for (int r = 0; r < kDraws; ++r) {
        double margin = 0;
        const std::int32_t want = aff::test::tempered_draw(want_q, double(u[std::size_t(r)]), &margin);
        const std::int32_t id = got[std::size_t(r)];
        if (id < 0 || id >= cols || want_q[std::size_t(id)] <= 0) {
            ++zero_mass;
            continue;
        }
        if (id != want && margin > 1e-5) ++unexplained;  // float running sums: within 1e-5 of a boundary only
        copies += copy[std::size_t(r)] != id;
    }
    std::vector<float> q0(q.begin(), q.begin() + cols), wq(want_q.begin(), want_q.end());
    add(rows, "sample_rows", what + ": ids other than the host's away from a boundary", double(unexplained), 0.0);
    add(rows, "sample_rows", what + ": ids of q 0 or out of range, copies differing", double(zero_mass + copies), 0.0);
    add(rows, "sample_rows", what + ": q row vs the host's softmax (NMSE)", nmse(q0, wq), 1e-10);
    // Every row of q is the same row's.
    std::size_t rows_differ = 0;
    for (int r = 1; r < kDraws; ++r) rows_differ += !std::equal(q0.begin(), q0.end(), q.begin() + std::ptrdiff_t(r) * cols);
    add(rows, "sample_rows", what + ": q rows of the same logits differing", double(rows_differ), 0.0);
}

}  // namespace

AFF_DEVICE_TEST("sample_rows") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const int cols : {1, 7, 1031, 129280})
        for (const float t : {0.6f, 1.0f, 1.7f}) {
            std::vector<float> row = normal(std::size_t(cols), 0.0f, cols > 7 ? 3.0f : 1.0f);
            check_rows(std::to_string(cols) + " ids, T " + std::to_string(t).substr(0, 3), row, t, rows);
        }
    std::vector<float> holes = normal(1031, 0.0f, 2.0f);
    for (int i = 0; i < 1031; i += 7) holes[std::size_t(i)] = nan;
    for (int i = 3; i < 1031; i += 11) holes[std::size_t(i)] = -inf;
    check_rows("1031 ids with NaN and -inf entries", holes, 1.0f, rows);
    std::vector<float> peaked(1031, -30.0f);
    peaked[500] = 10.0f;
    peaked[900] = 9.0f;
    check_rows("1031 ids, two peaks", peaked, 0.5f, rows);
    check_rows("all -inf", std::vector<float>(64, -inf), 1.0f, rows);
    // A temperature of 0 is refused (greedy is argmax_rows's).
    aff::gpu::Buffer dx = to_device(std::vector<float>(8, 0.0f)), du = to_device(std::vector<float>(1, 0.5f)),
                     dout = poisoned(1, sizeof(int32_t));
    aff::gpu::Stream s;
    double refused = 1.0;
    try {
        aff::gpu::sample_rows(dx.as<float>(), 1, 8, 8, 0.0f, du.as<float>(), dout.as<int32_t>(), nullptr, s.handle());
    } catch (const std::exception&) {
        refused = 0.0;
    }
    add(rows, "sample_rows", "temperature 0 refused", refused, 0.0);
}
