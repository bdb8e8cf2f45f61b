#!/usr/bin/env python3
# Exports the trained tiny DeepSeek-V4 model (train_tiny.py's state.pt) in the official
# quantised layout that DeepSeek ships V4-Flash in (dsv4_export.py: FP8 E4M3 + E8M0
# 128x128 block scales for dense linears, FP4 E2M1 + E8M0 per-32 scales for routed
# experts, official names, the MTP layer as mtp.0.*), with config.json and tokenizer.json,
# and measures on held-out text what the quality table and the placement and speculative
# decoding work need, in results.json:
#   * perplexity of the bf16 model (the trained weights rounded to bf16, as shipped) and
#     of the dequantised official-layout weights, both run by transformers in float32
#     with the full-sequence forward; KL(bf16 || dequantised) and top-1 agreement;
#   * per-layer expert popularity (share of routed slots per expert; hash and learned
#     layers, and the MTP layer);
#   * the MTP head's greedy acceptance: the share of positions p where the argmax of the
#     MTP logits (trunk streams at p, text token p+1) equals the trunk's argmax at p+1;
#   * greedy continuations of fixed prompts (token ids and text), recomputing the whole
#     sequence at each step, as the oracle for aff's greedy output on these files;
#   * the evaluation windows' token ids, the training summary and file sizes.
# usage: export_tiny.py CKPT_DIR DATA_DIR OUT_DIR [--eval-windows 32] [--smoke]
import argparse, copy, json, os, shutil, sys, time

import numpy as np
import torch
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsv4_export import (official_config, official_globals, official_layer, official_mtp, round_bf16_,
                         write_safetensors)
from train_tiny import Taps, build, mtp_logits

PROMPTS = ["def fibonacci(n):", "import os\n\n\ndef ", "The ",
           "<｜User｜>What does `os.path.join` do?<｜Assistant｜></think>"]  # aff-run adds BOS itself
BUDGET_BYTES = 12_000_000  # train_tiny_model.sh's arithmetic; the .aff comes on top


def official_tensors(model, mtp):
    """Official-layout tensors of trunk and MTP, and the dequantised weights under
    transformers names (trunk) and 'mtp.*' names (MTP)."""
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items() if "inv_freq" not in k}
    cfg = model.config
    tensors, deq = official_globals(sd), {}
    for i in range(cfg.num_hidden_layers):
        tensors.update(official_layer(sd, f"model.layers.{i}.", f"layers.{i}.", cfg,
                                      cfg.mlp_layer_types[i] == "hash_moe", deq))
    layer_sd = {"model.layers.0." + k: v.detach().float().cpu() for k, v in mtp.layer.state_dict().items()
                if "inv_freq" not in k}
    mtp_deq = {}
    norms = {n: getattr(mtp, n).weight.detach().float().cpu() for n in ("enorm", "hnorm", "norm")}
    hc = mtp.hc_head
    tensors.update(official_mtp(layer_sd, mtp.config, mtp.e_proj.weight.detach().float().cpu(),
                                mtp.h_proj.weight.detach().float().cpu(), norms,
                                (hc.hc_fn.detach().float().cpu(), hc.hc_base.detach().float().cpu(),
                                 hc.hc_scale.detach().float().cpu()), mtp_deq))
    return tensors, deq, mtp_deq


def dequantised_copies(model, mtp, deq, mtp_deq):
    mq, tq = copy.deepcopy(model), copy.deepcopy(mtp)
    msd, tsd = mq.state_dict(), tq.state_dict()
    with torch.no_grad():
        for k, v in deq.items():
            msd[k].copy_(v)
        for k, v in mtp_deq.items():
            if k == "mtp.e_proj":
                tq.e_proj.weight.copy_(v)
            elif k == "mtp.h_proj":
                tq.h_proj.weight.copy_(v)
            else:
                tsd[k.replace("model.layers.0.", "layer.", 1)].copy_(v)
    changed = sum(int(not torch.equal(msd[k].cpu(), model.state_dict()[k].cpu())) for k in deq)
    return mq, tq, changed


@torch.no_grad()
def evaluate(model, mtp, windows, batch):
    """Per-token NLL, argmax and log-probabilities of trunk and MTP on the windows, with
    every router's expert counts."""
    taps = Taps(model, mtp, indexer_loss=False)
    nll, mtp_nll, accept, mtp_hit, trunk_hit, logps = [], [], [], [], [], []
    for i in range(0, len(windows), batch):
        w = windows[i:i + batch]
        ids = w[:, :-1]
        logits = model(input_ids=ids, use_cache=False).logits.float()
        lp = torch.log_softmax(logits, -1)
        nll.append(-lp.gather(-1, w[:, 1:, None]).squeeze(-1))
        logps.append(lp.cpu())
        l2 = torch.log_softmax(mtp_logits(model, mtp, taps, ids).float(), -1)
        mtp_nll.append(-l2.gather(-1, w[:, 2:, None]).squeeze(-1))
        draft, trunk_next = l2.argmax(-1), logits[:, 1:].argmax(-1)
        accept.append((draft == trunk_next).float())
        mtp_hit.append((draft == w[:, 2:]).float())
        trunk_hit.append((logits.argmax(-1) == w[:, 1:]).float())
    load = taps.take_load()
    names = [n for n, _ in taps.learned + taps.hashed]
    taps.close()
    cat = lambda xs: torch.cat([x.reshape(-1) for x in xs])
    return dict(nll=cat(nll), mtp_nll=cat(mtp_nll), accept=cat(accept), mtp_hit=cat(mtp_hit), trunk_hit=cat(trunk_hit),
                logp=torch.cat(logps), load={n: v.cpu() for n, v in load.items()}, names=sorted(names))


@torch.no_grad()
def greedy(model, prompt_ids, n, device):
    ids = list(prompt_ids)
    for _ in range(n):
        x = torch.tensor([ids], device=device)
        nxt = int(model(input_ids=x, use_cache=False).logits[0, -1].float().argmax())
        ids.append(nxt)
        if nxt == 1:  # EOS
            break
    return ids[len(prompt_ids):]


def popularity(load, names):
    out = {}
    for name in names:
        v = load[name].double()
        share = (v / v.sum().clamp_min(1)).tolist()
        out[name] = {"share": [round(x, 5) for x in share], "max_over_mean": round(float(v.max() / v.mean().clamp_min(1e-9)), 3),
                     "min_over_mean": round(float(v.min() / v.mean().clamp_min(1e-9)), 3)}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--eval-windows", type=int, default=32)
    ap.add_argument("--eval-seq", type=int, default=512)
    ap.add_argument("--eval-batch", type=int, default=8)
    ap.add_argument("--greedy-tokens", type=int, default=48)
    ap.add_argument("--name", default="tiny-trained")
    ap.add_argument("--manifest", help="build_corpus.py's manifest.json, whose summary goes into results.json")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.eval_windows, a.eval_seq, a.greedy_tokens = 4, 128, 8
    t0 = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False  # the oracle numbers are float32
    os.makedirs(a.out, exist_ok=True)
    st = torch.load(os.path.join(a.ckpt, "state.pt"), map_location="cpu", weights_only=False)
    d = st["d"]
    model, mtp = build(d, st["seed"], "cpu")
    model.load_state_dict(st["model"])
    mtp.load_state_dict(st["mtp"])
    with torch.no_grad():
        round_bf16_(model)  # what ships: every stored float is a bf16 value (F32 tensors hold them exactly)
        round_bf16_(mtp)
    model.eval()
    mtp.eval()

    tensors, deq, mtp_deq = official_tensors(model, mtp)
    for fname in ("model.safetensors", "config.json", "tokenizer.json"):
        p = os.path.join(a.out, fname)
        if os.path.exists(p):
            os.remove(p)  # nothing half-written stays loadable
    write_safetensors(os.path.join(a.out, "model.safetensors.tmp"), tensors)
    os.replace(os.path.join(a.out, "model.safetensors.tmp"), os.path.join(a.out, "model.safetensors"))
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(official_config(a.name, d), f, indent=1)
    shutil.copyfile(os.path.join(a.data, "tokenizer.json"), os.path.join(a.out, "tokenizer.json"))
    size = os.path.getsize(os.path.join(a.out, "model.safetensors"))
    print(f"export_tiny: {len(tensors)} tensors, model.safetensors {size / 1e6:.2f} MB "
          f"({len(deq)} trunk and {len(mtp_deq)} MTP tensors quantised)", flush=True)

    heldout = np.memmap(os.path.join(a.data, "heldout.bin"), dtype="<u2", mode="r")
    S = a.eval_seq
    n = min(a.eval_windows, len(heldout) // (S + 1))
    if n == 0:
        raise SystemExit(f"export_tiny: heldout.bin has {len(heldout)} tokens, fewer than one window of {S + 1}")
    starts = np.linspace(0, len(heldout) - (S + 1), n).astype(np.int64)
    windows = torch.from_numpy(np.stack([np.asarray(heldout[s:s + S + 1], dtype=np.int64) for s in starts])).to(device)

    model, mtp = model.to(device), mtp.to(device)
    mq, tq, changed = dequantised_copies(model, mtp, deq, mtp_deq)
    ref = evaluate(model, mtp, windows, a.eval_batch)
    qnt = evaluate(mq, tq, windows, a.eval_batch)
    kl = (ref["logp"].exp() * (ref["logp"] - qnt["logp"])).sum(-1)
    top1 = (ref["logp"].argmax(-1) == qnt["logp"].argmax(-1)).float()

    def summary(r):
        return {"perplexity": round(float(r["nll"].mean().exp()), 4), "nll": round(float(r["nll"].mean()), 5),
                "top1_accuracy": round(float(r["trunk_hit"].mean()), 5),
                "mtp_perplexity": round(float(r["mtp_nll"].mean().exp()), 4),
                "mtp_accuracy": round(float(r["mtp_hit"].mean()), 5),
                "mtp_greedy_acceptance": round(float(r["accept"].mean()), 5)}

    tok = Tokenizer.from_file(os.path.join(a.data, "tokenizer.json"))
    samples = []
    for p in PROMPTS:
        pids = [0] + tok.encode(p, add_special_tokens=False).ids
        out_ref = greedy(model, pids, a.greedy_tokens, device)
        out_q = greedy(mq, pids, a.greedy_tokens, device)
        samples.append({"prompt": p, "prompt_ids": pids, "bf16_ids": out_ref, "bf16_text": tok.decode(out_ref, skip_special_tokens=False),
                        "dequantised_ids": out_q, "dequantised_text": tok.decode(out_q, skip_special_tokens=False)})
        print(f"export_tiny: {p!r} -> {samples[-1]['dequantised_text']!r}", flush=True)

    results = {
        "name": a.name, "smoke": a.smoke, "transformers": __import__("transformers").__version__,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "config": d, "training": {k: st.get(k) for k in ("step", "planned", "elapsed", "tokens", "done", "seed")} | {"args": st["args"]},
        "files": {f: os.path.getsize(os.path.join(a.out, f)) for f in ("model.safetensors", "config.json", "tokenizer.json")},
        "budget_bytes": BUDGET_BYTES, "within_budget": size <= BUDGET_BYTES,
        "parameters": {"trunk": sum(p.numel() for p in model.parameters()), "mtp": sum(p.numel() for p in mtp.parameters())},
        "heldout": {"windows": n, "window_tokens": S, "scored_tokens": int(ref["nll"].numel()),
                    "bf16": summary(ref), "dequantised_official": summary(qnt),
                    "kl_bf16_to_dequantised": round(float(kl.mean()), 6),
                    "top1_agreement_bf16_dequantised": round(float(top1.mean()), 5),
                    "tensors_changed_by_quantisation": changed},
        "expert_popularity_bf16": popularity(ref["load"], ref["names"]),
        "expert_popularity_dequantised": popularity(qnt["load"], qnt["names"]),
        "greedy": samples,
        "eval_window_starts": starts.tolist(),
        "eval_windows": windows.cpu().tolist(),
        "seconds": round(time.time() - t0, 1),
    }
    with open(os.path.join(a.data, "tokenizer_stats.json")) as f:
        results["tokenizer"] = json.load(f)
    if a.manifest:
        with open(a.manifest) as f:
            results["corpus"] = json.load(f)["summary"]
    with open(os.path.join(a.out, "results.json.tmp"), "w") as f:
        json.dump(results, f, indent=1, ensure_ascii=False)
    os.replace(os.path.join(a.out, "results.json.tmp"), os.path.join(a.out, "results.json"))
    print("export_tiny:", json.dumps(results["heldout"]), flush=True)
    if size > BUDGET_BYTES:
        print(f"export_tiny: WARNING model.safetensors is {size} bytes, over the {BUDGET_BYTES} budget", flush=True)


if __name__ == "__main__":
    main()
