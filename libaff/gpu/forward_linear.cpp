// One linear map of the GPU forward (GpuModel::Impl::apply): FP8 projections through fp8_gemv
// (or fp8_gemm for prefill calls), BF16 ones through bf16_gemv (or bf16_gemm for prefill
// calls), F32 ones and shapes bf16_gemv refuses through dense_gemv; and the head's dense
// rows (dense_rows); two FP8 maps over the same input in one launch (apply_pair).
#include "libaff/gpu/forward_impl.hpp"
#include "kernels/bf16_gemv.hpp"
#include "kernels/fp8_gemm.hpp"
#include "kernels/fp8_gemv.hpp"

#include <algorithm>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::dense_rows(const void* w, DenseType type, int rows, int cols, const float* xin, int ldx,
                                int batch, float* yout, int ldy, void* on_stream) {
    void* s = on_stream ? on_stream : stream.handle();
    if (type == DenseType::bf16 && bf16_gemv_takes(w, cols, xin, ldx, std::min(batch, kBf16GemvMaxBatch))) {
        for (int b = 0; b < batch; b += kBf16GemvMaxBatch)
            bf16_gemv(static_cast<const std::uint16_t*>(w), rows, cols, xin + std::size_t(b) * ldx, ldx,
                      std::min(kBf16GemvMaxBatch, batch - b), yout + std::size_t(b) * ldy, ldy, s);
        return;
    }
    dense_gemv(w, type, rows, cols, xin, ldx, batch, yout, ldy, s);
}

void GpuModel::Impl::apply(const Linear& l, const float* xin, int ldx, int batch, float* yout, int ldy, int row0,
                           int rows, void* on_stream) {
    if (rows < 0) rows = l.rows;
    void* s = on_stream ? on_stream : stream.handle();
    if (!l.fp8) {
        const std::size_t elem = l.type == DenseType::bf16 ? 2 : 4;
        if (use_gemm(batch) && l.type == DenseType::bf16 && bf16_gemm_takes(rows, l.cols, xin, ldx, yout, ldy)) {
            bf16_gemm(reinterpret_cast<const std::uint16_t*>(at<std::uint8_t>(l.w_offset) + std::size_t(row0) * l.cols * 2),
                      rows, l.cols, xin, ldx, batch, yout, ldy, s);
            return;
        }
        dense_rows(at<std::uint8_t>(l.w_offset) + std::size_t(row0) * l.cols * elem, l.type, rows, l.cols, xin, ldx,
                   batch, yout, ldy, s);
        return;
    }
    const std::uint8_t* w = at<std::uint8_t>(l.w_offset) + std::size_t(row0) * l.cols;
    const std::uint8_t* sc = at<std::uint8_t>(l.scale_offset) + std::size_t(row0 / 128) * (l.cols / 128);
    if (use_gemm(batch) && fp8_gemm_takes(rows, l.cols, xin, ldx, yout, ldy)) {
        fp8_gemm(w, sc, rows, l.cols, xin, ldx, batch, yout, ldy, s);
        return;
    }
    Fp8GemvLayout layout;
    layout.ldx = ldx;
    layout.ldy = ldy;
    for (int b = 0; b < batch; b += kFp8GemvMaxBatch)
        fp8_gemv_layout(w, sc, rows, l.cols, xin + std::size_t(b) * ldx, std::min(kFp8GemvMaxBatch, batch - b),
                        yout + std::size_t(b) * ldy, layout, kFp8GemvDefault, s);
}

void GpuModel::Impl::apply_pair(const Linear& l0, float* y0, int ldy0, const Linear& l1, float* y1, int ldy1,
                                const float* xin, int ldx, int batch) {
    const int rows_per_group = kFp8GemvDefault.rows_per_group;
    if (!l0.fp8 || !l1.fp8 || l0.cols != l1.cols || use_gemm(batch) || l0.rows % rows_per_group != 0 ||
        l1.rows % rows_per_group != 0) {
        apply(l0, xin, ldx, batch, y0, ldy0);
        apply(l1, xin, ldx, batch, y1, ldy1);
        return;
    }
    for (int b = 0; b < batch; b += kFp8GemvMaxBatch) {
        const Fp8GemvPart parts[2] = {
            {at<std::uint8_t>(l0.w_offset), at<std::uint8_t>(l0.scale_offset), l0.rows, y0 + std::size_t(b) * ldy0, ldy0},
            {at<std::uint8_t>(l1.w_offset), at<std::uint8_t>(l1.scale_offset), l1.rows, y1 + std::size_t(b) * ldy1, ldy1}};
        fp8_gemv_multi(parts, 2, l0.cols, xin + std::size_t(b) * ldx, ldx, std::min(kFp8GemvMaxBatch, batch - b),
                       kFp8GemvDefault, stream.handle());
    }
}

}  // namespace aff::gpu
