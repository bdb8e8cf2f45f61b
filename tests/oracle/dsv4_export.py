#!/usr/bin/env python3
# DeepSeek-V4 in the two forms the tests/oracle scripts write: transformers' config (for
# DeepseekV4ForCausalLM) and the official quantised checkpoint layout (FP8 E4M3 with E8M0
# 128x128 block scales for dense linears, FP4 E2M1 with E8M0 per-32 scales for routed
# experts, official tensor names, MTP layer under mtp.0.). Shared by make_model_fixtures.py
# (random fixtures) and export_tiny.py (the trained tiny model) so both write the same
# bytes for the same weights. Model doc sections 2.1-2.4 define the layout.
import json, math, struct
import numpy as np
import torch

ROPE_MAIN = {"rope_type": "default", "rope_theta": 10000.0}
ROPE_COMPRESS = {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16.0,
                 "original_max_position_embeddings": 65536, "beta_fast": 32.0, "beta_slow": 1.0,
                 "attention_factor": 1.0}


def tf_config(d):
    prf = d["qk_rope_head_dim"] / d["head_dim"]
    c = dict(architectures=["DeepseekV4ForCausalLM"], model_type="deepseek_v4",
             num_key_value_heads=1, scoring_func="sqrtsoftplus", norm_topk_prob=True,
             hidden_act="silu", hc_eps=1e-6, rms_norm_eps=1e-6, rope_theta=10000.0,
             compress_rope_theta=160000.0, max_position_embeddings=4096,
             num_nextn_predict_layers=1, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1,
             partial_rotary_factor=prf,
             rope_parameters={"main": dict(ROPE_MAIN, partial_rotary_factor=prf),
                              "compress": dict(ROPE_COMPRESS, partial_rotary_factor=prf)})
    for k, v in d.items():
        if k not in ("qk_rope_head_dim",):
            c[k] = v
    return c


def round_bf16_(m):
    for name, p in list(m.named_parameters()) + list(m.named_buffers()):
        if p.dtype == torch.float32 and "inv_freq" not in name:
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


# --- minimal safetensors writer (so F8_E8M0 and packed FP4 need no library support) ---
def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def t_f32(t):
    return ("F32", tuple(t.shape), t.float().contiguous().numpy().astype("<f4").tobytes())


def t_bf16(t):
    return ("BF16", tuple(t.shape), t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().astype("<i2").tobytes())


def t_i64(t):
    return ("I64", tuple(t.shape), t.long().contiguous().numpy().astype("<i8").tobytes())


def quant_fp8(w):
    """E4M3 weight + E8M0 scale per 128x128 block; returns (weight, scale, dequantised)."""
    N, K = w.shape
    bn, bk = (N + 127) // 128, (K + 127) // 128
    s_exp = torch.zeros(bn, bk, dtype=torch.int32)
    deq = torch.empty_like(w)
    q = torch.empty(N, K, dtype=torch.float8_e4m3fn)
    for i in range(bn):
        for j in range(bk):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            amax = max(blk.abs().max().item(), 1e-30)
            e = math.ceil(math.log2(amax / 448.0))
            s = 2.0 ** e
            qb = (blk / s).to(torch.float8_e4m3fn)
            q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = qb
            deq[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = qb.float() * s
            s_exp[i, j] = e + 127
    wq = ("F8_E4M3", (N, K), q.view(torch.uint8).numpy().tobytes())
    sc = ("F8_E8M0", (bn, bk), s_exp.numpy().astype(np.uint8).tobytes())
    return wq, sc, deq


FP4_GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def quant_fp4(w):
    """E2M1 codes packed two per byte (low nibble = even column) + E8M0 scale per 32."""
    a = w.double().numpy()
    N, K = a.shape
    g = a.reshape(N, K // 32, 32)
    amax = np.maximum(np.abs(g).max(-1), 1e-30)
    e = np.ceil(np.log2(amax / 6.0)).astype(np.int64)
    s = np.exp2(e.astype(np.float64))[..., None]
    x = g / s
    code = np.abs(np.abs(x)[..., None] - FP4_GRID).argmin(-1)
    code = code + 8 * ((x < 0) & (code > 0))
    deq = np.where(code >= 8, -1.0, 1.0) * FP4_GRID[code % 8] * s
    code = code.reshape(N, K)
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).astype(np.uint8)
    wq = ("I8", (N, K // 2), packed.tobytes())
    sc = ("F8_E8M0", (N, K // 32), (e + 127).astype(np.uint8).tobytes())
    return wq, sc, torch.from_numpy(deq.reshape(N, K)).float()


FP8_LEAVES = ("wq_a", "wq_b", "wkv", "wo_a", "wo_b", "e_proj", "h_proj")


def official_layer(sd, src, dst, cfg, is_hash, deq_out):
    """Official tensors of one decoder layer from a transformers state dict.
    src: transformers prefix ('model.layers.3.'); dst: official prefix ('layers.3.')."""
    out = {}
    def put_fp8(name, key):
        wq, sc, deq = quant_fp8(sd[key].float())
        out[name + ".weight"], out[name + ".scale"] = wq, sc
        deq_out[key] = deq
    out[dst + "attn_norm.weight"] = t_bf16(sd[src + "input_layernorm.weight"])
    out[dst + "ffn_norm.weight"] = t_bf16(sd[src + "post_attention_layernorm.weight"])
    for site, hc in (("attn", "attn_hc"), ("ffn", "ffn_hc")):
        for leaf in ("fn", "base", "scale"):
            out[f"{dst}hc_{site}_{leaf}"] = t_f32(sd[f"{src}{hc}.{leaf}"])
    a, o = src + "self_attn.", dst + "attn."
    out[o + "attn_sink"] = t_f32(sd[a + "sinks"])
    put_fp8(o + "wq_a", a + "q_a_proj.weight")
    out[o + "q_norm.weight"] = t_bf16(sd[a + "q_a_norm.weight"])
    put_fp8(o + "wq_b", a + "q_b_proj.weight")
    put_fp8(o + "wkv", a + "kv_proj.weight")
    out[o + "kv_norm.weight"] = t_bf16(sd[a + "kv_norm.weight"])
    put_fp8(o + "wo_a", a + "o_a_proj.weight")
    put_fp8(o + "wo_b", a + "o_b_proj.weight")
    if a + "compressor.kv_proj.weight" in sd:
        c, oc = a + "compressor.", o + "compressor."
        out[oc + "wkv.weight"] = t_bf16(sd[c + "kv_proj.weight"])
        out[oc + "wgate.weight"] = t_bf16(sd[c + "gate_proj.weight"])
        out[oc + "ape"] = t_f32(sd[c + "position_bias"])
        out[oc + "norm.weight"] = t_bf16(sd[c + "kv_norm.weight"])
        if c + "indexer.kv_proj.weight" in sd:
            i, oi = c + "indexer.", o + "indexer."
            put_fp8(oi + "wq_b", i + "q_b_proj.weight")
            out[oi + "weights_proj.weight"] = t_bf16(sd[i + "scorer.weights_proj.weight"])
            out[oi + "compressor.wkv.weight"] = t_bf16(sd[i + "kv_proj.weight"])
            out[oi + "compressor.wgate.weight"] = t_bf16(sd[i + "gate_proj.weight"])
            out[oi + "compressor.ape"] = t_f32(sd[i + "position_bias"])
            out[oi + "compressor.norm.weight"] = t_bf16(sd[i + "kv_norm.weight"])
    f, of = src + "mlp.", dst + "ffn."
    out[of + "gate.weight"] = t_bf16(sd[f + "gate.weight"])
    if is_hash:
        out[of + "gate.tid2eid"] = t_i64(sd[f + "gate.tid2eid"])
    else:
        out[of + "gate.bias"] = t_f32(sd[f + "gate.e_score_correction_bias"])
    for off, tf in (("w1", "gate_proj"), ("w2", "down_proj"), ("w3", "up_proj")):
        put_fp8(f"{of}shared_experts.{off}", f"{f}shared_experts.{tf}.weight")
    I = cfg.moe_intermediate_size
    gu, dn = sd[f + "experts.gate_up_proj"].float(), sd[f + "experts.down_proj"].float()
    gu_deq, dn_deq = torch.empty_like(gu), torch.empty_like(dn)
    for e in range(gu.shape[0]):
        for off, w, rows in (("w1", gu[e, :I], slice(0, I)), ("w3", gu[e, I:], slice(I, 2 * I))):
            wq, sc, deq = quant_fp4(w)
            out[f"{of}experts.{e}.{off}.weight"], out[f"{of}experts.{e}.{off}.scale"] = wq, sc
            gu_deq[e, rows] = deq
        wq, sc, deq = quant_fp4(dn[e])
        out[f"{of}experts.{e}.w2.weight"], out[f"{of}experts.{e}.w2.scale"] = wq, sc
        dn_deq[e] = deq
    deq_out[f + "experts.gate_up_proj"] = gu_deq
    deq_out[f + "experts.down_proj"] = dn_deq
    return out


def official_config(name, d):
    ratio = {"sliding_attention": 0, "compressed_sparse_attention": d["compress_rates"]["compressed_sparse_attention"],
             "heavily_compressed_attention": d["compress_rates"]["heavily_compressed_attention"]}
    c = {k: v for k, v in d.items() if k not in ("layer_types", "compress_rates", "mlp_layer_types")}
    c.update(architectures=["DeepseekV4ForCausalLM"], model_type="deepseek_v4", num_key_value_heads=1,
             compress_ratios=[ratio[t] for t in d["layer_types"]] + [0],
             num_hash_layers=d["mlp_layer_types"].count("hash_moe"), scoring_func="sqrtsoftplus",
             topk_method="noaux_tc", norm_topk_prob=True, hidden_act="silu", hc_eps=1e-6, rms_norm_eps=1e-6,
             rope_theta=10000.0, compress_rope_theta=160000.0,
             rope_scaling={"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                           "beta_fast": 32, "beta_slow": 1},
             max_position_embeddings=4096, num_nextn_predict_layers=1, expert_dtype="fp4",
             quantization_config={"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                  "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
             tie_word_embeddings=False, bos_token_id=0, eos_token_id=1, torch_dtype="bfloat16")
    return c


def official_globals(sd):
    """The six global tensors (model doc 2.2) from a transformers state dict."""
    return {"embed.weight": t_bf16(sd["model.embed_tokens.weight"]),
            "head.weight": t_bf16(sd["lm_head.weight"]),
            "norm.weight": t_bf16(sd["model.norm.weight"]),
            "hc_head_fn": t_f32(sd["model.hc_head.hc_fn"]),
            "hc_head_base": t_f32(sd["model.hc_head.hc_base"]),
            "hc_head_scale": t_f32(sd["model.hc_head.hc_scale"])}


def official_mtp(layer_sd, cfg, e_proj, h_proj, norms, hc_head, deq_out):
    """mtp.0.* (model doc 2.4): a sliding, learned-router decoder layer (layer_sd holds it
    under transformers names with the prefix 'model.layers.0.') plus e_proj/h_proj [D, D]
    (FP8), the norms {'enorm','hnorm','norm': [D]} (BF16) and hc_head = (fn, base, scale)
    (F32). Dequantised FP8/FP4 weights go to deq_out: the layer's under its transformers
    names, the projections as 'mtp.e_proj' / 'mtp.h_proj'."""
    out = official_layer(layer_sd, "model.layers.0.", "mtp.0.", cfg, False, deq_out)
    for name, w in (("e_proj", e_proj), ("h_proj", h_proj)):
        wq, sc, deq = quant_fp8(w.float())
        out[f"mtp.0.{name}.weight"], out[f"mtp.0.{name}.scale"] = wq, sc
        deq_out["mtp." + name] = deq
    for nrm in ("enorm", "hnorm", "norm"):
        out[f"mtp.0.{nrm}.weight"] = t_bf16(norms[nrm])
    for leaf, t in zip(("fn", "base", "scale"), hc_head):
        out[f"mtp.0.hc_head_{leaf}"] = t_f32(t)
    return out
