#!/usr/bin/env python3
# The fidelity oracle (issue: DeepSeek-V4's function on every valid config). For each checkpoint
# directory given (the config sweep written by tests/oracle/make_sweep_checkpoints, and any
# fixture under tests/data/models), runs on the same weights:
#   * DeepSeek's own reference inference/model.py (REFERENCE_DIR holds its model.py and kernel.py,
#     fetched from DeepSeek's V4 release; never committed here) in float32 on the CPU, with the
#     quantisation-aware-training simulations switched off (activation FP8, KV FP8 round trip,
#     indexer Hadamard + FP4: aff's CPU forward is the ideal model, model doc §3.11), as a whole
#     prompt and as one token after another (the two modes the reference supports);
#   * transformers' DeepseekV4ForCausalLM: one call over the whole prompt, chunked with a cache,
#     and token by token, each with torch's own top-k and with the stable top-k below.
# Top-k at an exact tie (the indexer's scores are exactly 0 wherever every head's ReLU is 0, which
# a model with few indexer heads meets often) has no answer in the reference: torch.topk leaves the
# order of equal values unspecified and it differs between shapes. The oracle breaks ties by the
# lower index (a stable sort), which is aff's rule, so its answer is defined and reproducible.
# Prompts are drawn until no top-k choice (indexer or router) is a near tie (a gap that is not
# exactly 0 but below 1e-4 relative), where float rounding alone could flip the choice.
# Writes OUT/<name>/golden.safetensors (tokens I64 [S], logits F32 [S, V] of the reference's
# whole-prompt run) and OUT/<name>/golden.json (what each path measured), OUT/summary.json.
#     python3 tests/oracle/fidelity_sweep.py [--jobs N] REFERENCE_DIR OUT CHECKPOINT_DIR...
import json
import math
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import v4_checkpoint_io as io  # noqa: E402

torch.set_grad_enabled(False)
torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))

_torch_topk, _tensor_topk = torch.topk, torch.Tensor.topk
TIE = {"stable": True, "exact_ties": 0, "near_tie": math.inf, "record": False}


def stable_topk(x, k, dim=-1, largest=True, sorted=True):
    v, i = torch.sort(x, dim=dim, descending=largest, stable=True)
    if TIE["record"] and x.shape[dim] > k and k > 0:
        kth, nxt = v.narrow(dim, k - 1, 1), v.narrow(dim, k, 1)
        fin = torch.isfinite(kth) & torch.isfinite(nxt)
        gap = (kth - nxt).abs()
        scale = torch.maximum(kth.abs(), nxt.abs()).clamp_min(1e-30)
        rel = torch.where(fin, gap / scale, torch.full_like(gap, math.inf))
        TIE["exact_ties"] += int(((gap == 0) & fin).sum())
        nz = rel[(gap > 0) & fin]
        if nz.numel():
            TIE["near_tie"] = min(TIE["near_tie"], float(nz.min()))
    return torch.return_types.topk((v.narrow(dim, 0, k), i.narrow(dim, 0, k)))


def use_topk(stable):
    torch.topk = stable_topk if stable else _torch_topk
    torch.Tensor.topk = stable_topk if stable else _tensor_topk


# ---------------------------------------------------------------- the reference
def load_reference(ref_dir):
    sys.path.insert(0, ref_dir)
    for attr in ("float4_e2m1fn_x2", "float8_e8m0fnu"):  # names the reference touches; older torch lacks them
        if not hasattr(torch, attr):
            setattr(torch, attr, torch.complex32)
    import model as ref  # noqa: E402  (DeepSeek's inference/model.py)

    ref.act_quant = lambda x, *a, **k: x          # KV FP8 round trip off (QAT simulation)
    ref.fp4_act_quant = lambda x, *a, **k: x      # indexer FP4 off
    ref.rotate_activation = lambda x: x           # its Hadamard only matters with the FP4 rounding

    def sparse_attn(q, kv, attn_sink, topk_idxs, softmax_scale):  # the reference kernel's maths, in q's dtype
        b, s, h, d = q.shape
        valid = topk_idxs != -1
        idx = topk_idxs.clamp_min(0).long()
        kv_sel = kv.unsqueeze(1).expand(b, s, -1, d).gather(2, idx.unsqueeze(-1).expand(b, s, idx.size(-1), d))
        scores = torch.einsum("bshd,bskd->bshk", q, kv_sel) * softmax_scale
        scores = scores.masked_fill(~valid.unsqueeze(2), float("-inf"))
        m = torch.maximum(scores.max(dim=-1).values, attn_sink.view(1, 1, h).to(q.dtype))
        e = torch.exp(scores - m.unsqueeze(-1))
        w = e / (e.sum(-1) + torch.exp(attn_sink.view(1, 1, h).to(q.dtype) - m)).unsqueeze(-1)
        return torch.einsum("bshk,bskd->bshd", w, kv_sel)

    ref.sparse_attn = sparse_attn
    ref.ParallelHead.get_logits = lambda self, x: F.linear(x.float(), self.weight)  # every position
    return ref


def ratios(cfg):
    if "layer_types" in cfg:
        rates = cfg.get("compress_rates", {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128})
        r = {"sliding_attention": 0, "compressed_sparse_attention": rates["compressed_sparse_attention"],
             "heavily_compressed_attention": rates["heavily_compressed_attention"]}
        return [r[t] for t in cfg["layer_types"]]
    return list(cfg["compress_ratios"][: cfg["num_hidden_layers"]])


def reference_args(ref, cfg, seq):
    rp = cfg.get("rope_parameters", {})
    main, comp = rp.get("main", {}), rp.get("compress", {})
    rs = cfg.get("rope_scaling") or {}
    nh = cfg.get("num_hash_layers")
    if nh is None:
        nh = sum(1 for t in cfg.get("mlp_layer_types", []) if t == "hash_moe")
    a = ref.ModelArgs(
        max_batch_size=1, max_seq_len=max(256, seq + 8), dtype="bf16", scale_fmt=None, expert_dtype=None,
        scale_dtype="fp32", vocab_size=cfg["vocab_size"], dim=cfg["hidden_size"],
        moe_inter_dim=cfg["moe_intermediate_size"], n_layers=cfg["num_hidden_layers"], n_hash_layers=nh,
        n_mtp_layers=0, n_heads=cfg["num_attention_heads"], n_routed_experts=cfg["n_routed_experts"],
        n_shared_experts=cfg.get("n_shared_experts", 1), n_activated_experts=cfg["num_experts_per_tok"],
        score_func=cfg.get("scoring_func", "sqrtsoftplus"), route_scale=cfg.get("routed_scaling_factor", 1.0),
        swiglu_limit=cfg.get("swiglu_limit", 0.0), q_lora_rank=cfg["q_lora_rank"], head_dim=cfg["head_dim"],
        rope_head_dim=cfg.get("qk_rope_head_dim") or int(round(cfg["head_dim"] * cfg["partial_rotary_factor"])),
        norm_eps=cfg.get("rms_norm_eps", 1e-6), o_groups=cfg["o_groups"], o_lora_rank=cfg["o_lora_rank"],
        window_size=cfg["sliding_window"], compress_ratios=tuple(ratios(cfg)) + (0,),
        compress_rope_theta=comp.get("rope_theta", cfg.get("compress_rope_theta", 160000.0)),
        original_seq_len=comp.get("original_max_position_embeddings", rs.get("original_max_position_embeddings", 0)),
        rope_theta=main.get("rope_theta", cfg.get("rope_theta", 10000.0)),
        rope_factor=comp.get("factor", rs.get("factor", 1.0)), beta_fast=comp.get("beta_fast", rs.get("beta_fast", 32)),
        beta_slow=comp.get("beta_slow", rs.get("beta_slow", 1)), index_n_heads=cfg["index_n_heads"],
        index_head_dim=cfg["index_head_dim"], index_topk=cfg["index_topk"], hc_mult=cfg["hc_mult"],
        hc_sinkhorn_iters=cfg.get("hc_sinkhorn_iters", 20), hc_eps=cfg.get("hc_eps", 1e-6))
    return a


def build_reference(ref, cfg, off, seq):
    args = reference_args(ref, cfg, seq)
    torch.set_default_dtype(torch.float32)
    m = ref.Transformer(args).float().eval()
    sd = {}
    for k, t in off.items():
        if not k.startswith("mtp."):  # the trunk only (n_mtp_layers 0)
            sd[k] = t.long() if k.endswith("tid2eid") else t.float()
    missing, unexpected = m.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.endswith("tid2eid")]
    if missing or unexpected:
        raise RuntimeError(f"reference state dict: missing {missing[:5]} unexpected {unexpected[:5]}")
    for layer in m.layers:  # int64 ids for gather (the reference declares int32)
        if layer.ffn.gate.hash:
            layer.ffn.gate.tid2eid = torch.nn.Parameter(off[f"layers.{layer.layer_id}.ffn.gate.tid2eid"].long(),
                                                        requires_grad=False)
    return m


def reference_whole(ref, cfg, off, ids):
    return build_reference(ref, cfg, off, ids.shape[1])(ids, 0)[0].float()


def reference_steps(ref, cfg, off, ids):
    m = build_reference(ref, cfg, off, ids.shape[1])  # fresh caches
    return torch.cat([m(ids[:, p:p + 1], p)[0].float() for p in range(ids.shape[1])], 0)


# ---------------------------------------------------------------- transformers
def transformers_runs(d, off, ids, chunks):
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    from transformers.cache_utils import DynamicCache
    cfg = DeepseekV4Config.from_pretrained(d)
    m = DeepseekV4ForCausalLM(cfg).float().eval()
    trunk = {k: t for k, t in off.items() if not k.startswith("mtp.")}
    tf = {k: (t.long() if k.endswith("tid2eid") else t.float()) for k, t in io.to_transformers(trunk).items()}
    own = m.state_dict()
    for k in own:
        if k not in tf and "inv_freq" not in k:
            raise RuntimeError(f"transformers: no tensor for {k}")
    for k in tf:
        if k not in own:
            raise RuntimeError(f"transformers: unexpected tensor {k}")
    m.load_state_dict(tf, strict=False)
    out = {}
    out["one_call"] = m(ids, use_cache=False).logits[0].float()
    cache, parts, at = DynamicCache(config=m.config), [], 0
    for c in chunks:
        parts.append(m(ids[:, at:at + c], past_key_values=cache, use_cache=True).logits[0].float())
        at += c
    out["chunked"] = torch.cat(parts, 0)
    cache = DynamicCache(config=m.config)
    out["token_by_token"] = torch.cat(
        [m(ids[:, i:i + 1], past_key_values=cache, use_cache=True).logits[0].float() for i in range(ids.shape[1])], 0)
    return out


def compare(a, ref):
    """Per position: max|Δ| / max|ref| over the vocabulary; first position above 1e-4; argmax flips."""
    rel = ((a - ref).abs().max(-1).values / ref.abs().max(-1).values.clamp_min(1e-30))
    above = (rel > 1e-4).nonzero()
    return {"max_rel": float(rel.max()), "first_above_1e-4": int(above[0]) if above.numel() else None,
            "argmax_differs": int((a.argmax(-1) != ref.argmax(-1)).sum())}


def chunk_plan(S, seed):
    g = torch.Generator().manual_seed(seed)
    plan, at = [], 0
    while at < S:
        c = int(torch.randint(1, 48, (1,), generator=g))
        c = min(c, S - at)
        plan.append(c)
        at += c
    return plan


def write_golden(dst, ids, logits, meta):
    os.makedirs(dst, exist_ok=True)
    tensors = {"tokens": ("I64", tuple(ids[0].shape), ids[0].long().numpy().astype("<i8").tobytes()),
               "logits": ("F32", tuple(logits.shape), logits.float().contiguous().numpy().astype("<f4").tobytes())}
    header, blobs, off = {}, [], 0
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(dst, "golden.safetensors"), "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)
    with open(os.path.join(dst, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1)


def run_case(ref, d, out_dir, seq, index):
    cfg = json.load(open(os.path.join(d, "config.json")))
    name = os.path.basename(os.path.normpath(d))
    off = io.read_checkpoint(d)
    V = cfg["vocab_size"]
    meta = {"name": name, "sequence": seq}
    g = torch.Generator().manual_seed(1000 + index)
    use_topk(True)
    for attempt in range(40):
        ids = torch.randint(2, V, (1, seq), generator=g)
        ids[0, 0] = 0
        TIE.update(exact_ties=0, near_tie=math.inf, record=True)
        t0 = time.time()
        whole = reference_whole(ref, cfg, off, ids)
        TIE["record"] = False
        if TIE["near_tie"] > 1e-4:
            break
        print(f"{name}: prompt {attempt} has a near tie ({TIE['near_tie']:.2e}), drawing another", flush=True)
    else:
        meta["warning"] = "no prompt without near ties in 40 draws"
    meta.update(prompt_attempts=attempt + 1, exact_ties=TIE["exact_ties"],
                nearest_tie=TIE["near_tie"] if math.isfinite(TIE["near_tie"]) else None)
    steps = reference_steps(ref, cfg, off, ids)
    meta.update(reference_seconds=round(time.time() - t0, 2), reference_token_by_token=compare(steps, whole))
    chunks = chunk_plan(seq, 77 + index)
    meta["chunks"] = chunks
    for stable in (False, True):
        use_topk(stable)
        key = "transformers_stable_topk" if stable else "transformers"
        try:
            runs = transformers_runs(d, off, ids, chunks)
            meta[key] = {k: compare(v, whole) for k, v in runs.items()}
            meta[key]["one_call_vs_chunked"] = compare(runs["chunked"], runs["one_call"])
        except Exception as e:  # recorded, not fatal: the reference is the oracle
            meta[key] = {"error": repr(e), "trace": traceback.format_exc()[-2000:]}
    use_topk(True)
    write_golden(os.path.join(out_dir, name), ids, whole, meta)
    print(json.dumps(meta), flush=True)
    return meta


def one(job):
    ref_dir, out, index, d = job
    torch.set_num_threads(1)  # tiny models: many workers of one thread each beat threads
    ref = load_reference(ref_dir)
    seq = 100
    cases = os.path.join(os.path.dirname(os.path.normpath(d)), "cases.json")
    if os.path.exists(cases):
        for c in json.load(open(cases)):
            if c["name"] == os.path.basename(os.path.normpath(d)):
                seq = c["sequence"]
    try:
        return run_case(ref, d, out, seq, index)
    except Exception as e:
        print("FAILED", d, traceback.format_exc(), flush=True)
        return {"name": d, "error": repr(e), "trace": traceback.format_exc()[-3000:]}


def main():
    # python3 fidelity_sweep.py [--jobs N] REFERENCE_DIR OUT CHECKPOINT_DIR...
    args = sys.argv[1:]
    jobs = 1
    if args[0] == "--jobs":
        jobs, args = int(args[1]), args[2:]
    ref_dir, out, dirs = args[0], args[1], args[2:]
    os.makedirs(out, exist_ok=True)
    work = [(ref_dir, out, i, d) for i, d in enumerate(dirs)]
    if jobs > 1:
        import multiprocessing as mp
        with mp.get_context("fork").Pool(jobs) as pool:
            summary = pool.map(one, work, chunksize=1)
    else:
        summary = [one(w) for w in work]
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
