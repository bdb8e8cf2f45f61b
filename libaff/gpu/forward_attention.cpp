// The attention block on the GPU (model doc §3.4-3.8, Model::attention step by step):
// projections, norms, RoPE, the compressors and the indexer, the attention kernel over the
// ring and the compressed entries, the grouped output projection. A DSpark draft block
// (block_ring_first ≥ 0, forward_dspark.cpp) takes the kernel's block mode and stores nothing
// in the ring.
#include "libaff/gpu/forward_impl.hpp"
#include "libaff/gpu/forward_rope.hpp"
#include "kernels/attention.hpp"
#include "kernels/compressor.hpp"
#include "kernels/fp8_gemv.hpp"
#include "kernels/indexer.hpp"
#include "kernels/rms_norm.hpp"

#include <algorithm>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::run_compressor(const CompressorRefs& w, const CompressorStateRefs& st, std::span<const Seq> seqs,
                                    int n, float* kv_buf, float* gate_buf, std::vector<CompressorArgs>& steps) {
    const int D = c.hidden_size, width = (w.overlap ? 2 : 1) * w.dim;
    apply(w.wkv, a, D, n, kv_buf, width);
    apply(w.wgate, a, D, n, gate_buf, width);
    for (const Seq& q : seqs) {
        CompressorArgs ca;
        ca.kv = kv_buf + std::size_t(q.row) * width;
        ca.gate = gate_buf + std::size_t(q.row) * width;
        ca.ape = at<float>(w.ape);
        ca.norm = at<float>(w.norm);
        ca.inv_freq = at<float>(inv_freq_compress_dev);
        ca.pending_kv = reinterpret_cast<float*>(q.state + st.pending_kv);
        ca.pending_gate = reinterpret_cast<float*>(q.state + st.pending_gate);
        ca.prev_kv = w.overlap ? reinterpret_cast<float*>(q.state + st.prev_kv) : nullptr;
        ca.prev_gate = w.overlap ? reinterpret_cast<float*>(q.state + st.prev_gate) : nullptr;
        ca.entries = reinterpret_cast<float*>(q.state + st.entries);
        ca.n = q.n;
        ca.ratio = w.ratio;
        ca.dim = w.dim;
        ca.rope_dim = c.rope_dim;
        ca.overlap = w.overlap;
        ca.eps = static_cast<float>(c.rms_norm_eps);
        ca.start = q.start;
        ca.start_at = q.start_at;
        steps.push_back(ca);
    }
}

int GpuModel::Impl::entry_bound(const Seq& q, int ratio, int capacity) {
    return q.start_at ? capacity : static_cast<int>(compressor_end_entry(q.start, q.n, ratio));
}

void GpuModel::Impl::attention_gpu(int l, std::span<const Seq> seqs, int n) {
    void* s = stream.handle();
    const AttentionRefs& r = layers[l].attn;
    const LayerStateRefs& sr = state_refs[l];
    const int D = c.hidden_size, H = c.num_heads, Dh = c.head_dim, Rq = c.q_lora_rank;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const bool sliding = l >= c.num_layers || c.attention[l] == AttentionKind::sliding;  // the MTP layer: sliding
    const std::vector<float>& inv = sliding ? inv_freq_main : inv_freq_compress;
    // Query path: low-rank q, q_norm, per-head unweighted norm, RoPE.
    // wq_a and wkv (the latent that is both key and value) read the same input: one launch.
    mark("attention q/kv projections");
    apply_pair(r.wq_a, cq, Rq, r.wkv, kv, Dh, a, D, n);
    rms_norm(cq, at<float>(r.q_norm), cq, n, Rq, eps, s);
    apply(r.wq_b, cq, Rq, n, q, H * Dh);
    rms_norm_rope_with_inv_freq(q, nullptr, q, n, H, Dh, eps, positions, inv, s);
    rms_norm_rope_with_inv_freq(kv, at<float>(r.kv_norm), kv, n, 1, Dh, eps, positions, inv, s);

    mark("compressors and indexer");
    // Both compressors of the layer for every sequence: one launch pair per 8 steps.
    std::vector<CompressorArgs> steps;
    if (r.has_compressor) run_compressor(r.compressor, sr.compressor, seqs, n, ckv, cg, steps);
    if (r.has_indexer) run_compressor(r.indexer, sr.indexer, seqs, n, ikv, ig, steps);
    for (std::size_t i = 0; i < steps.size(); i += kCompressorMaxBatch)
        compressor_batch(steps.data() + i, static_cast<int>(std::min<std::size_t>(kCompressorMaxBatch, steps.size() - i)), s);
    const int Hi = c.index_heads, Di = c.index_head_dim;
    if (r.has_indexer) {  // §3.7: score the indexer keys, keep the top index_topk (every sequence at once)
        apply(r.index_wq_b, cq, Rq, n, qi, Hi * Di);
        rope_with_inv_freq(qi, positions, n, Hi, Di, inv_freq_compress, false, s);
        apply(r.index_weights, a, D, n, wi, Hi);
        std::vector<IndexerSeq> iseqs;
        for (const Seq& sq : seqs) {
            IndexerSeq is;
            is.keys = reinterpret_cast<const float*>(sq.state + sr.indexer.entries);
            is.row = sq.row;
            is.n = sq.n;
            is.start = sq.start;
            is.start_at = sq.start_at;
            is.count = entry_bound(sq, r.indexer.ratio, sr.indexer.capacity);
            iseqs.push_back(is);
        }
        for (std::size_t i = 0; i < iseqs.size(); i += kIndexerMaxBatch)
            indexer_batch(qi, wi, scores, selected, selected_count, iseqs.data() + i,
                          static_cast<int>(std::min<std::size_t>(kIndexerMaxBatch, iseqs.size() - i)), Hi, Di,
                          r.indexer.ratio, scores_stride, c.index_topk, s,
                          use_gemm(n) ? IndexerMath::bf16_mma : IndexerMath::fp32);  // prefill: tensor cores
    }
    mark("attention kernel, ring");
    const std::size_t scratch_per_token = attention_scratch_bytes(1, H, Dh) / 4;
    std::vector<AttentionArgs> list;
    std::vector<float*> rings;
    bool batch = seqs.size() <= std::size_t(kAttentionMaxBatch);  // decode: every sequence one token, with scratch
    for (const Seq& sq : seqs) {
        AttentionArgs aa;
        if (r.has_compressor) {
            aa.entries = reinterpret_cast<const float*>(sq.state + sr.compressor.entries);
            aa.entry_count = entry_bound(sq, r.compressor.ratio, sr.compressor.capacity);
            aa.ratio = r.compressor.ratio;
        }
        if (r.has_indexer) {
            aa.selected = selected + std::size_t(sq.row) * c.index_topk;
            aa.selected_count = selected_count + sq.row;
            aa.selected_stride = c.index_topk;
        }
        aa.q = q + std::size_t(sq.row) * H * Dh;
        aa.kv = kv + std::size_t(sq.row) * Dh;
        aa.ring = reinterpret_cast<float*>(sq.state + sr.ring);
        aa.sink = at<float>(r.sink);
        aa.out = o + std::size_t(sq.row) * H * Dh;
        aa.n = sq.n;
        aa.heads = H;
        aa.head_dim = Dh;
        aa.window = c.sliding_window;
        aa.start = sq.start;
        aa.start_at = sq.start_at;
        // Sequences of a decode call (rows < kDecodeTokens) each have their own slice.
        if (sq.row + sq.n <= kDecodeTokens) aa.scratch = attention_scratch + std::size_t(sq.row) * scratch_per_token;
        if (block_ring_first >= 0) {  // a draft block: the prefill kernel's block mode
            aa.ring_first = block_ring_first;
            aa.scratch = nullptr;
        }
        batch = batch && aa.scratch && sq.n == 1;
        list.push_back(aa);
        rings.push_back(reinterpret_cast<float*>(sq.state + sr.ring));
    }
    if (batch) {  // one launch (and its merge) for all sequences, each token stored in its ring there
        attention_batch(list.data(), static_cast<int>(list.size()), rings.data(), s);
    } else {
        for (const AttentionArgs& aa : list) attention(aa, s);
        for (const Seq& sq : seqs)
            if (block_ring_first < 0)
                ring_store(reinterpret_cast<float*>(sq.state + sr.ring), kv + std::size_t(sq.row) * Dh, sq.n, Dh,
                           c.sliding_window, sq.start, s, sq.start_at);
    }
    rope_with_inv_freq(o, positions, n, H, Dh, inv, true, s);  // de-rotate at the query position
    // Grouped low-rank output projection, then wo_b.
    mark("attention output projections");
    const int G = c.o_groups, Ro = c.o_lora_rank, group_in = H * Dh / G;
    if (r.wo_a.fp8 && Ro % 8 == 0 && !use_gemm(n)) {
        // All G groups in one launch: row group g reads its slice of o (fp8_gemv_layout).
        Fp8GemvLayout layout;
        layout.ldx = H * Dh;
        layout.ldy = G * Ro;
        layout.group_rows = Ro;
        layout.x_group_stride = group_in;
        for (int b = 0; b < n; b += kFp8GemvMaxBatch)
            fp8_gemv_layout(at<std::uint8_t>(r.wo_a.w_offset), at<std::uint8_t>(r.wo_a.scale_offset), G * Ro,
                            r.wo_a.cols, o + std::size_t(b) * H * Dh, std::min(kFp8GemvMaxBatch, n - b),
                            z + std::size_t(b) * G * Ro, layout, kFp8GemvDefault, stream.handle());
    } else {
        for (int g = 0; g < G; ++g)
            apply(r.wo_a, o + std::size_t(g) * group_in, H * Dh, n, z + std::size_t(g) * Ro, G * Ro, g * Ro, Ro);
    }
    apply(r.wo_b, z, G * Ro, n, f, D);
}

}  // namespace aff::gpu
