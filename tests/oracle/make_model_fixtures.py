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
# The config form and the official layout are dsv4_export.py's (shared with export_tiny.py).
import copy, json, math, os, sys
import torch
import torch.nn.functional as F
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.cache_utils import DynamicCache

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsv4_export import (official_config, official_globals, official_layer, official_mtp, round_bf16_, t_f32,
                         t_i64, tf_config, write_safetensors)

torch.backends.cuda.matmul.allow_tf32 = False
torch.set_grad_enabled(False)

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
        shard1 = official_globals(sd)
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
        D = cfg.hidden_size
        # Drawn in this order (e_proj, h_proj, then the norms) so the committed fixture's
        # bytes do not change.
        e_proj, h_proj = (torch.randn(D, D, generator=g) / math.sqrt(D) for _ in range(2))
        norms = {nrm: 0.6 + 0.8 * torch.rand(D, generator=g) for nrm in ("enorm", "hnorm", "norm")}
        hc_head = (msd["model.hc_head.hc_fn"], msd["model.hc_head.hc_base"], msd["model.hc_head.hc_scale"])
        shard2.update(official_mtp(msd, mcfg, e_proj, h_proj, norms, hc_head, {}))
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
