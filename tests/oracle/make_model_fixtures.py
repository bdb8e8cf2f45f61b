#!/usr/bin/env python3
# Builds the tiny DeepSeek-V4 model fixtures under tests/data/models and their golden
# logits, using Hugging Face transformers (DeepseekV4ForCausalLM, checked with 5.17) as
# the independent oracle. Run on a machine with torch + transformers:
#     python3 tests/oracle/make_model_fixtures.py OUT_DIR
# Every parameter and buffer is randomised with a fixed seed and scaled so activations
# are O(1): the default init leaves sinks, position biases, correction bias and tid2eid
# at zero, which would hide bugs. Each model is saved with save_pretrained (as a user
# would get it) and reloaded before the oracle runs, so the logits belong to exactly the
# bytes committed. One model is also written in the official quantised layout (FP8 E4M3
# with E8M0 128x128 block scales for dense linears, FP4 E2M1 with E8M0 per-32 scales for
# routed experts, official tensor names, two shards, plus an MTP layer); its logits come
# from transformers running the dequantised weights. Oracle files per model:
#   oracle.safetensors  tokens I64 [S], logits F32 [S, V] (prefill, every position)
#   oracle.json         prompt length, chunk plan, and how far transformers' own
#                       chunked / token-by-token runs were from its prefill
# transformers runs on the CPU in float32 so the tolerance in the tests is meaningful.
import copy, json, math, os, struct, sys
import numpy as np
import torch
import torch.nn.functional as F
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.cache_utils import DynamicCache

torch.backends.cuda.matmul.allow_tf32 = False
torch.set_grad_enabled(False)

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


# The models. "a" follows model doc §8 (layer order, ratios, window, top-k, hash layers,
# clamp) at smaller widths so the fixtures stay small; "b" and "c" vary what §8 fixes.
MODELS = {
    "tiny-a": dict(
        vocab_size=256, hidden_size=128, num_hidden_layers=6, num_attention_heads=4, head_dim=64,
        qk_rope_head_dim=32, q_lora_rank=64, o_groups=2, o_lora_rank=32, sliding_window=16,
        layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                     "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
        mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe", "moe", "moe"],
        index_n_heads=8, index_head_dim=64, index_topk=4, n_routed_experts=8, num_experts_per_tok=3,
        n_shared_experts=1, moe_intermediate_size=32, routed_scaling_factor=1.5, swiglu_limit=1.0,
        hc_mult=4, hc_sinkhorn_iters=20),
    "tiny-b": dict(
        vocab_size=256, hidden_size=64, num_hidden_layers=3, num_attention_heads=2, head_dim=64,
        qk_rope_head_dim=32, q_lora_rank=32, o_groups=1, o_lora_rank=32, sliding_window=24,
        layer_types=["compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 32},
        mlp_layer_types=["hash_moe", "moe", "moe"],
        index_n_heads=8, index_head_dim=64, index_topk=8, n_routed_experts=6, num_experts_per_tok=3,
        n_shared_experts=1, moe_intermediate_size=32, routed_scaling_factor=2.5, swiglu_limit=2.0,
        hc_mult=2, hc_sinkhorn_iters=5),
    "tiny-c": dict(
        vocab_size=256, hidden_size=64, num_hidden_layers=4, num_attention_heads=8, head_dim=32,
        qk_rope_head_dim=16, q_lora_rank=32, o_groups=4, o_lora_rank=16, sliding_window=8,
        layer_types=["heavily_compressed_attention", "compressed_sparse_attention", "sliding_attention",
                     "compressed_sparse_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
        index_n_heads=4, index_head_dim=32, index_topk=2, n_routed_experts=6, num_experts_per_tok=2,
        n_shared_experts=1, moe_intermediate_size=32, routed_scaling_factor=1.0, swiglu_limit=0.5,
        hc_mult=3, hc_sinkhorn_iters=10),
}
PLAN = {  # prompt length, chunk sizes, how the transformers save is done, storage dtype
    "tiny-a": dict(S=100, chunks=[23, 47, 30], save_original_format=True, dtype="bf16", seed=1),
    "tiny-b": dict(S=80, chunks=[7, 61, 12], save_original_format=True, dtype="bf16", seed=2),
    "tiny-c": dict(S=60, chunks=[9, 33, 18], save_original_format=False, dtype="bf16", seed=3),
}


def randomise(m, cfg, g):
    D = cfg.hidden_size
    def normal(t, std):
        t.copy_(torch.randn(t.shape, generator=g) * std)
    for name, p in m.named_parameters():
        leaf = name.split(".")[-1]
        if leaf == "sinks":
            normal(p, 1.0)
        elif leaf == "position_bias":
            normal(p, 1.0)
        elif leaf in ("fn", "hc_fn"):
            normal(p, 2.0 / math.sqrt(p.shape[1]))
        elif leaf in ("base", "hc_base"):
            normal(p, 0.5)
        elif leaf in ("scale", "hc_scale"):
            p.copy_(0.5 + torch.rand(p.shape, generator=g))
        elif p.dim() == 1:  # RMSNorm weights
            p.copy_(0.6 + 0.8 * torch.rand(p.shape, generator=g))
        elif "embed_tokens" in name:
            normal(p, 1.0)
        elif leaf == "gate_up_proj":
            normal(p, 1.5 / math.sqrt(p.shape[2]))
        elif leaf == "down_proj" and p.dim() == 3:
            normal(p, 1.0 / math.sqrt(p.shape[2]))
        elif "mlp.gate.weight" in name or "compressor" in name and "gate_proj" in name:
            normal(p, 2.0 / math.sqrt(p.shape[1]))
        elif p.dim() == 2:
            normal(p, 1.0 / math.sqrt(p.shape[1]))
        else:
            raise SystemExit(f"randomise: no rule for {name} {tuple(p.shape)}")
    for name, b in m.named_buffers():
        if name.endswith("e_score_correction_bias"):
            normal(b, 0.5)
        elif name.endswith("tid2eid"):
            E, k = cfg.n_routed_experts, cfg.num_experts_per_tok
            rows = [torch.randperm(E, generator=g)[:k] for _ in range(b.shape[0])]
            b.copy_(torch.stack(rows))
        elif "inv_freq" in name:
            pass  # derived from the config, not a weight
        else:
            raise SystemExit(f"randomise: no rule for buffer {name}")


def round_bf16_(m):
    for name, p in list(m.named_parameters()) + list(m.named_buffers()):
        if p.dtype == torch.float32 and "inv_freq" not in name:
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def selection_margin(m, ids):
    """Smallest gap, over every query and every top-k choice (indexer and learned
    router), between the last chosen and the first rejected score. Top-k with a tie at
    the boundary has no defined answer (torch's order among equal scores is
    arbitrary), so prompts whose selections are that close are not used as oracles."""
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mod
    gaps, hooks = [], []
    S = ids.shape[1]
    def scorer_hook(module, inputs, out):
        scores = out[0]  # [S, T]
        for p in range(S):
            visible = min(scores.shape[1], (p + 1) // 4)
            k = m.config.index_topk
            if visible > k:
                v = scores[p, :visible].sort(descending=True).values
                gaps.append(float(v[k - 1] - v[k]))
    def router_hook(module, inputs, out):
        logits = out[0]
        s = torch.sqrt(F.softplus(logits)) + module.e_score_correction_bias
        v = s.sort(dim=-1, descending=True).values
        k = module.top_k
        if v.shape[-1] > k:
            gaps.append(float((v[:, k - 1] - v[:, k]).min()))
    for mod_ in m.modules():
        if isinstance(mod_, mod.DeepseekV4IndexerScorer):
            hooks.append(mod_.register_forward_hook(scorer_hook))
        if isinstance(mod_, mod.DeepseekV4TopKRouter):
            hooks.append(mod_.register_forward_hook(router_hook))
    m(ids, use_cache=False)
    for h in hooks:
        h.remove()
    return min(gaps) if gaps else float("inf")


def run_modes(m, ids, chunks):
    full = m(ids, use_cache=False).logits[0].float()
    out = {"prefill": full}
    try:
        cache = DynamicCache(config=m.config)
        parts, at = [], 0
        for c in chunks:
            parts.append(m(ids[:, at:at + c], past_key_values=cache, use_cache=True).logits[0].float())
            at += c
        out["chunked"] = torch.cat(parts, 0)
    except Exception as e:  # recorded, not fatal: the prefill logits are the oracle
        out["chunked_error"] = repr(e)
    try:
        cache = DynamicCache(config=m.config)
        parts = [m(ids[:, i:i + 1], past_key_values=cache, use_cache=True).logits[0].float()
                 for i in range(ids.shape[1])]
        out["decode"] = torch.cat(parts, 0)
    except Exception as e:
        out["decode_error"] = repr(e)
    return out


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


def write_oracle(dst, ids, modes, plan, extra=None):
    logits = modes["prefill"]
    write_safetensors(os.path.join(dst, "oracle.safetensors"),
                      {"tokens": t_i64(ids[0]), "logits": t_f32(logits)})
    meta = {"prompt_length": int(ids.shape[1]), "chunks": plan["chunks"],
            "min_topk_selection_margin": plan["selection_margin"],
            "transformers": __import__("transformers").__version__,
            "max_abs_logit": float(logits.abs().max()), "logit_std": float(logits.std()),
            "distinct_argmax": int(logits.argmax(-1).unique().numel())}
    for k in ("chunked", "decode"):
        if k in modes:
            meta[f"transformers_{k}_max_abs_diff"] = float((modes[k] - logits).abs().max())
        else:
            meta[f"transformers_{k}_error"] = modes.get(f"{k}_error")
    if extra:
        meta.update(extra)
    with open(os.path.join(dst, "oracle.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(dst, json.dumps(meta))


def main():
    out = sys.argv[1]
    for name, d in MODELS.items():
        plan = PLAN[name]
        g = torch.Generator().manual_seed(plan["seed"])
        cfg = DeepseekV4Config(**tf_config(d))
        m = DeepseekV4ForCausalLM(cfg).float().eval()
        randomise(m, cfg, g)
        if plan["dtype"] == "bf16":
            round_bf16_(m)
        dst = os.path.join(out, name)
        save = copy.deepcopy(m)
        if plan["dtype"] == "bf16":
            save = save.to(torch.bfloat16)
        save.save_pretrained(dst, save_original_format=plan["save_original_format"])
        m2 = DeepseekV4ForCausalLM.from_pretrained(dst, dtype=torch.float32).eval()
        sd1, sd2 = m.state_dict(), m2.state_dict()
        for k in sd1:
            if "inv_freq" not in k and not torch.equal(sd1[k].float(), sd2[k].float()):
                raise SystemExit(f"{name}: {k} changed through save/load")
        for attempt in range(100):
            ids = torch.randint(2, d["vocab_size"], (1, plan["S"]), generator=g)
            ids[0, 0] = 0  # BOS
            margin = selection_margin(m2, ids)
            if margin > 1e-4:
                break
            print(name, "prompt", attempt, "has a top-k selection margin of", margin, "- drawing another")
        else:
            raise SystemExit(name + ": no prompt without near-ties in 100 draws")
        plan["selection_margin"] = margin
        modes = run_modes(m2, ids, plan["chunks"])
        write_oracle(dst, ids, modes, plan)

        if name != "tiny-a":
            continue
        # Official quantised layout of the same model (+ a random MTP layer), two shards.
        qname = name + "-fp8"
        qdst = os.path.join(out, qname)
        os.makedirs(qdst, exist_ok=True)
        sd = {k: v for k, v in m.state_dict().items() if "inv_freq" not in k}
        deq = {}
        shard1 = {"embed.weight": t_bf16(sd["model.embed_tokens.weight"]),
                  "head.weight": t_bf16(sd["lm_head.weight"]),
                  "norm.weight": t_bf16(sd["model.norm.weight"]),
                  "hc_head_fn": t_f32(sd["model.hc_head.hc_fn"]),
                  "hc_head_base": t_f32(sd["model.hc_head.hc_base"]),
                  "hc_head_scale": t_f32(sd["model.hc_head.hc_scale"])}
        shard2 = {}
        for i in range(cfg.num_hidden_layers):
            t = official_layer(sd, f"model.layers.{i}.", f"layers.{i}.", cfg,
                               cfg.mlp_layer_types[i] == "hash_moe", deq)
            (shard1 if i < 3 else shard2).update(t)
        # MTP: a sliding-only learned-router layer from a one-layer model of the same widths.
        md = dict(d, num_hidden_layers=1, layer_types=["sliding_attention"], mlp_layer_types=["moe"])
        mcfg = DeepseekV4Config(**tf_config(md))
        mm = DeepseekV4ForCausalLM(mcfg).float().eval()
        randomise(mm, mcfg, g)
        round_bf16_(mm)
        msd = mm.state_dict()
        shard2.update(official_layer(msd, "model.layers.0.", "mtp.0.", mcfg, False, {}))
        D = cfg.hidden_size
        for proj in ("e_proj", "h_proj"):
            w = (torch.randn(D, D, generator=g) / math.sqrt(D))
            wq, sc, _ = quant_fp8(w)
            shard2[f"mtp.0.{proj}.weight"], shard2[f"mtp.0.{proj}.scale"] = wq, sc
        for nrm in ("enorm", "hnorm", "norm"):
            shard2[f"mtp.0.{nrm}.weight"] = t_bf16(0.6 + 0.8 * torch.rand(D, generator=g))
        shard2["mtp.0.hc_head_fn"] = t_f32(msd["model.hc_head.hc_fn"])
        shard2["mtp.0.hc_head_base"] = t_f32(msd["model.hc_head.hc_base"])
        shard2["mtp.0.hc_head_scale"] = t_f32(msd["model.hc_head.hc_scale"])
        files = {"model-00001-of-00002.safetensors": shard1, "model-00002-of-00002.safetensors": shard2}
        weight_map = {}
        for fn, ts in files.items():
            write_safetensors(os.path.join(qdst, fn), ts)
            weight_map.update({k: fn for k in ts})
        with open(os.path.join(qdst, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(len(v[2]) for ts in files.values() for v in ts.values())},
                       "weight_map": dict(sorted(weight_map.items()))}, f, indent=1)
        with open(os.path.join(qdst, "config.json"), "w") as f:
            json.dump(official_config(qname, d), f, indent=1)
        mq = copy.deepcopy(m)
        qsd = mq.state_dict()
        for k, v in deq.items():
            qsd[k].copy_(v)
        n_changed = sum(int(not torch.equal(qsd[k], sd[k])) for k in deq)
        modes = run_modes(mq, ids, plan["chunks"])
        write_oracle(qdst, ids, modes, plan, {"dequantised_tensors": len(deq), "changed_by_quantisation": n_changed})


if __name__ == "__main__":
    main()
