#!/usr/bin/env python3
# Trains the tiny DeepSeek-V4 model that aff embeds as its default, with transformers'
# DeepseekV4ForCausalLM (full-sequence forward, use_cache=False) and every feature of the
# architecture on: mHC (hc_mult 4), a sliding layer, CSA (ratio 4) layers whose indexer
# really selects (index_topk 16 of up to 128 entries at length 512) and an HCA layer,
# hash-routed first layers (tid2eid: random distinct rows, frozen), routed + shared
# experts with the sqrtsoftplus router and DeepSeek's auxiliary-loss-free balancing
# (after each step e_score_correction_bias += u * sign(mean load - load)), plus the MTP
# layer of model doc 5.1, which transformers neither builds nor trains, written here
# from transformers' own decoder-layer, hyper-head and norm classes and trained jointly
# on the next-next token (loss weight 0.3).
# The lightning indexer gets no gradient through its top-k, so it is trained as DeepSeek
# trains it (V3.2): a KL loss from the main attention's distribution over the compressed
# entries (summed over heads) to the indexer's scores, with the indexer's inputs
# detached so only the indexer learns from it; dense (every entry selected) for the first
# 10 % of the steps, sparse (over the selected entries) after that.
# Wall-clock budget, reproducible schedule: without --steps, the step count is planned
# once, at step 30, from the measured speed (--time-budget seconds of training) and kept
# in the checkpoint; the learning rate (40 linear warm-up steps, then cosine to 10 %) and
# the indexer's dense phase depend on the step only. So `--steps N` with the N the run
# planned (train_log.jsonl, results.json) repeats it: weights, tid2eid and every batch
# come from the seed (GPU kernels with atomics, e.g. index_add_, can still differ in the
# last bits). --time-limit stops a run that is slower than planned (then it is not a
# repetition, and the log says so). Resumable: a checkpoint every --checkpoint-seconds
# and at the end; a rerun with the same arguments continues.
# usage: train_tiny.py DATA_DIR CKPT_DIR [--steps N | --time-budget 420] [--smoke]
#   DATA_DIR: tokenizer.json, train.bin, heldout.bin (train_tokenizer.py)
#   CKPT_DIR: state.pt (resumable), train_log.jsonl
import argparse, json, math, os, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsv4_export import tf_config

# The model, in make_model_fixtures.py's compact form. Widths follow model doc 8.1/8.3
# (multiples of 128 for every FP8/FP4 GEMM input, Dh - Dr = 64, Di a power of two > Dr);
# the byte budget that fixes layers, experts and vocabulary is in train_tiny_model.sh.
TINY = dict(
    vocab_size=2048, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, head_dim=128,
    qk_rope_head_dim=64, q_lora_rank=128, o_groups=2, o_lora_rank=64, sliding_window=64,
    layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                 "compressed_sparse_attention"],
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
    mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"],
    index_n_heads=4, index_head_dim=128, index_topk=16, n_routed_experts=16, num_experts_per_tok=4,
    n_shared_experts=1, moe_intermediate_size=128, routed_scaling_factor=1.5, swiglu_limit=10.0,
    hc_mult=4, hc_sinkhorn_iters=20)


class Mtp(nn.Module):
    """The MTP layer (model doc 5.1): for trunk position p, its final streams H[p]
    (before the hyper head) and the embedding of token p+1 give the logits of token p+2:
    X0[k] = h_proj(hnorm(H[k])) + e_proj(enorm(e)), one sliding-attention, learned-router
    decoder layer, its own hyper head and norm, the trunk's lm_head. Row p runs at
    position p (as vLLM and aff do)."""

    def __init__(self, d, seed):
        super().__init__()
        md = dict(d, num_hidden_layers=1, layer_types=["sliding_attention"], mlp_layer_types=["moe"])
        torch.manual_seed(seed + 7)
        host = DeepseekV4ForCausalLM(DeepseekV4Config(**tf_config(md)))  # initialised as transformers does
        D, eps = d["hidden_size"], host.config.rms_norm_eps
        self.config = host.config
        norm = type(host.model.norm)  # transformers' weighted RMSNorm
        self.enorm, self.hnorm = norm(D, eps=eps), norm(D, eps=eps)
        self.e_proj, self.h_proj = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
        for lin in (self.e_proj, self.h_proj):
            nn.init.normal_(lin.weight, std=host.config.initializer_range)
        self.layer = host.model.layers[0]
        self.hc_head = host.model.hc_head
        self.norm = host.model.norm

    def forward(self, streams, next_embed, position_embeddings, position_ids, attention_mask):
        x = self.h_proj(self.hnorm(streams)) + self.e_proj(self.enorm(next_embed)).unsqueeze(2)
        x = self.layer(x, position_embeddings=position_embeddings, position_ids=position_ids,
                       attention_mask=attention_mask, input_ids=None, past_key_values=None)
        return self.norm(self.hc_head(x))


def build(d, seed, device):
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(DeepseekV4Config(**tf_config(d)))
    E, k = d["n_routed_experts"], d["num_experts_per_tok"]
    for i, kind in enumerate(d["mlp_layer_types"]):
        if kind == "hash_moe":
            g = torch.Generator().manual_seed(seed * 1000 + i)
            table = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(d["vocab_size"])])
            model.model.layers[i].mlp.gate.tid2eid.copy_(table)
    mtp = Mtp(d, seed)
    return model.to(device), mtp.to(device)


def _detach_inputs(module, args, kwargs):
    """The indexer learns from its own loss only: its inputs leave the main graph."""
    cut = lambda v: v.detach() if torch.is_tensor(v) else v
    return tuple(cut(v) for v in args), {k: cut(v) for k, v in kwargs.items()}


class Taps:
    """Forward hooks that read what the loss needs from inside transformers' modules: the
    trunk's position embeddings, mask and final streams (for the MTP layer), every
    router's selections (expert load), and per CSA layer the indexer's selection and
    scores and the main attention's weights (indexer loss)."""

    def __init__(self, model, mtp, indexer_loss):
        self.model, self.indexer_loss = model, indexer_loss
        self.counting, self.kl_terms, self.kl_on, self.indexer_loss_broken = True, [], False, False
        self.inputs, self.streams = {}, None
        self.learned, self.hashed = [], []  # (name, router module)
        self.load, self.handles = {}, []
        hook = lambda h: self.handles.append(h)
        layers = model.model.layers
        hook(layers[0].register_forward_pre_hook(self._grab_inputs, with_kwargs=True))
        hook(layers[-1].register_forward_hook(self._grab_streams))
        for name, m in list(model.named_modules()) + [("mtp." + n, m) for n, m in mtp.named_modules()]:
            # Recognised by what they hold, not by class name: the learned router keeps
            # the balancing bias, the hash router the token-to-expert table.
            if hasattr(m, "e_score_correction_bias") and hasattr(m, "num_experts"):
                self.learned.append((name, m))
            elif hasattr(m, "tid2eid") and hasattr(m, "num_experts"):
                self.hashed.append((name, m))
            else:
                continue
            self.load[name] = torch.zeros(m.num_experts, dtype=torch.float64, device=m.weight.device)
            hook(m.register_forward_hook(self._router_hook(name)))
        self.csa = {}
        if indexer_loss:
            for i, layer in enumerate(layers):
                comp = getattr(layer.self_attn, "compressor", None)
                idx = getattr(comp, "indexer", None) if comp is not None else None
                if idx is None:
                    continue
                if not hasattr(idx, "scorer") or not hasattr(idx, "index_topk"):
                    print("train_tiny: WARNING this transformers' indexer has no scorer/index_topk; "
                          "training without the indexer loss", flush=True)
                    self.csa.clear()
                    break
                slot = self.csa[i] = {}
                hook(idx.register_forward_pre_hook(_detach_inputs, with_kwargs=True))
                hook(idx.register_forward_hook(lambda m, a, out, slot=slot: slot.__setitem__("topk", out)))
                hook(idx.scorer.register_forward_hook(lambda m, a, out, slot=slot: slot.__setitem__("scores", out)))
                hook(layer.self_attn.register_forward_hook(lambda m, a, out, slot=slot: self._indexer_kl(slot, out)))

    def close(self):
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def indexers(self):
        return [self.model.model.layers[i].self_attn.compressor.indexer for i in self.csa]

    def _grab_inputs(self, module, args, kwargs):
        self.inputs = {k: kwargs.get(k) for k in ("position_embeddings", "position_ids", "attention_mask")}

    def _grab_streams(self, module, args, out):
        self.streams = out[0] if isinstance(out, tuple) else out

    def _router_hook(self, name):
        def hook(module, args, out):
            if self.counting:
                idx = out[2]
                self.load[name] += torch.bincount(idx.reshape(-1), minlength=module.num_experts).double()
        return hook

    def _indexer_kl(self, slot, out):
        if not self.kl_on:
            return
        scores, topk = slot.pop("scores", None), slot.pop("topk", None)
        if not (isinstance(out, tuple) and len(out) > 1 and torch.is_tensor(out[1]) and out[1].dim() == 4) or \
                scores is None or topk is None:
            print("train_tiny: WARNING the attention returned no [B, H, S, K] weights (or the indexer hooks saw "
                  "nothing); the indexer loss is switched off", flush=True)
            self.indexer_loss_broken = True
            return
        T = scores.shape[-1]
        if T == 0 or topk.numel() == 0:
            return
        w = out[1][..., -T:].detach().float().sum(1)  # [B, S, T] main attention mass on each entry
        valid = topk >= 0
        safe = topk.clamp(min=0)
        p = w.gather(-1, safe) * valid
        mass = p.sum(-1, keepdim=True)
        p = p / mass.clamp_min(1e-12)
        logq = torch.log_softmax(scores.float().gather(-1, safe).masked_fill(~valid, -1e4), dim=-1)
        kl = (p * (torch.log(p.clamp_min(1e-12)) - logq)).masked_fill(~valid, 0.0).sum(-1)
        rows = (mass.squeeze(-1) > 0) & valid.any(-1)
        if rows.any():
            self.kl_terms.append(kl[rows].mean())

    def take_load(self):
        out = {n: v.clone() for n, v in self.load.items()}
        for v in self.load.values():
            v.zero_()
        return out


def sliding_mask(n, window, device):
    """Additive [1, 1, n, n] mask: query i sees keys j with 0 <= i - j < window (the
    window includes the current token, model doc 1.2)."""
    i = torch.arange(n, device=device)
    rel = i[:, None] - i[None, :]
    ok = (rel >= 0) & (rel < window)
    return torch.zeros(n, n, device=device).masked_fill(~ok, float("-inf"))[None, None]


def mtp_logits(model, mtp, taps, ids):
    """MTP logits for rows 0..S-2 of the forward that just ran on `ids` [B, S]. Position
    embeddings and mask are the trunk's (read by the hooks) when they have the expected
    form, else made here the same way."""
    if taps.streams is None:
        raise SystemExit("train_tiny: the hook on the last decoder layer saw no output")
    S = ids.shape[1]
    n = S - 1
    pos = taps.inputs.get("position_ids")
    pos = pos[:, :n] if torch.is_tensor(pos) else torch.arange(n, device=ids.device)[None]
    pe = taps.inputs.get("position_embeddings")
    if isinstance(pe, dict) and "main" in pe:
        cos, sin = pe["main"]
        cos, sin = cos[:, :n], sin[:, :n]
    else:
        cos, sin = model.model.rotary_emb(taps.streams[:, :n, 0], position_ids=pos, layer_type="main")
    mask = taps.inputs.get("attention_mask")
    if torch.is_tensor(mask) and mask.dim() == 4 and mask.shape[-1] == S and mask.is_floating_point():
        mask = mask[..., :n, :n]
    else:
        mask = sliding_mask(n, model.config.sliding_window, ids.device)
    y = mtp(taps.streams[:, :n], model.model.embed_tokens(ids[:, 1:]), {"main": (cos, sin)}, pos, mask)
    return model.lm_head(y)


def batch_at(data, step, seed, B, S, device):
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, len(data) - (S + 1), size=B)
    w = torch.from_numpy(np.stack([np.asarray(data[s:s + S + 1], dtype=np.int64) for s in starts]))
    return w.to(device, non_blocking=True)


WARMUP_STEPS, PLAN_AT = 40, 30  # the plan is made during warm-up, which does not depend on it


def lr_at(step, planned, peak, floor=0.1):
    if step < WARMUP_STEPS:
        return peak * (step + 1) / WARMUP_STEPS
    t = min(1.0, (step - WARMUP_STEPS) / max(1, planned - WARMUP_STEPS))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


def param_groups(model, mtp, wd):
    groups = {"decay": [], "no_decay": [], "indexer": []}
    for name, p in list(model.named_parameters()) + [("mtp." + n, p) for n, p in mtp.named_parameters()]:
        if not p.requires_grad:
            continue
        if ".indexer." in name:
            groups["indexer"].append(p)
        elif p.dim() >= 2:
            groups["decay"].append(p)
        else:
            groups["no_decay"].append(p)
    opt_groups = [{"params": groups["decay"], "weight_decay": wd}, {"params": groups["no_decay"], "weight_decay": 0.0},
                  {"params": groups["indexer"], "weight_decay": 0.0}]
    return groups, [g for g in opt_groups if g["params"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("ckpt")
    ap.add_argument("--steps", type=int, default=0, help="optimizer steps (default: planned from --time-budget)")
    ap.add_argument("--time-budget", type=float, default=420.0, help="training seconds the plan aims at")
    ap.add_argument("--time-limit", type=float, default=480.0, help="training seconds after which a run stops anyway")
    ap.add_argument("--max-steps", type=int, default=4000, help="cap on the planned step count")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--bias-update", type=float, default=1e-3, help="u of the auxiliary-loss-free balancing")
    ap.add_argument("--indexer-dense-frac", type=float, default=0.1)
    ap.add_argument("--no-indexer-loss", action="store_true")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--checkpoint-seconds", type=float, default=60.0)
    ap.add_argument("--stop-after", type=int, default=0, help="end this call after N steps (to test resuming)")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--smoke", action="store_true", help="a few small steps: checks the pipeline, not the model")
    a = ap.parse_args()
    if a.smoke:
        a.batch, a.seq, a.log_every = 4, 128, 1
        a.steps = min(a.steps or 6, 6)
    if not torch.cuda.is_available() and not a.smoke:
        raise SystemExit("train_tiny: no CUDA device (the full run is meant for the H200; --smoke runs on the CPU too)")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    os.makedirs(a.ckpt, exist_ok=True)

    with open(os.path.join(a.data, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    vocab = len(tok["model"]["vocab"])
    d = dict(TINY, vocab_size=vocab)
    data = np.memmap(os.path.join(a.data, "train.bin"), dtype="<u2", mode="r")
    if len(data) < 10 * (a.seq + 1):
        raise SystemExit(f"train_tiny: train.bin has {len(data)} tokens, too few for length {a.seq}")
    if int(data[: 1 << 20].max()) >= vocab:
        raise SystemExit("train_tiny: train.bin holds ids outside the tokenizer's vocabulary")

    model, mtp = build(d, a.seed, device)
    model.train()
    mtp.train()
    taps = Taps(model, mtp, not a.no_indexer_loss)
    groups, opt_groups = param_groups(model, mtp, a.weight_decay)
    try:
        opt = torch.optim.AdamW(opt_groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=device == "cuda")
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(opt_groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    n_params = sum(p.numel() for p in model.parameters())
    n_mtp = sum(p.numel() for p in mtp.parameters())
    print(f"train_tiny: trunk {n_params / 1e6:.2f} M parameters, MTP {n_mtp / 1e6:.2f} M, vocab {vocab}, "
          f"attention {model.config._attn_implementation}, device {device}", flush=True)

    state_path = os.path.join(a.ckpt, "state.pt")
    step, elapsed, tokens, planned = 0, 0.0, 0, a.steps
    if os.path.exists(state_path):
        st = torch.load(state_path, map_location=device, weights_only=False)
        if st["d"] != d or st["seed"] != a.seed:
            raise SystemExit(f"train_tiny: {state_path} belongs to another model or seed; remove it to start over")
        model.load_state_dict(st["model"])
        mtp.load_state_dict(st["mtp"])
        opt.load_state_dict(st["opt"])
        step, elapsed, tokens = st["step"], st["elapsed"], st["tokens"]
        if a.steps and st["planned"] and a.steps != st["planned"]:
            raise SystemExit(f"train_tiny: {state_path} was planned for {st['planned']} steps, not {a.steps}")
        planned = planned or st["planned"]
        print(f"train_tiny: resumed at step {step} of {planned or 'unplanned'} ({elapsed:.0f} s, "
              f"{tokens / 1e6:.1f} M tokens)", flush=True)

    def save(done):
        tmp = state_path + ".tmp"
        torch.save({"d": d, "seed": a.seed, "step": step, "planned": planned, "elapsed": elapsed, "tokens": tokens, "done": done,
                    "args": vars(a), "model": model.state_dict(), "mtp": mtp.state_dict(), "opt": opt.state_dict()}, tmp)
        os.replace(tmp, state_path)

    log = open(os.path.join(a.ckpt, "train_log.jsonl"), "a")
    sparse_topk = d["index_topk"]
    start_step = step
    t_last_ckpt = time.time()
    t_window, tok_window = time.time(), 0
    t_plan = None  # (step, elapsed) where the speed measurement starts
    stop_reason = "steps"
    while not planned or step < planned:
        if elapsed >= a.time_limit:
            stop_reason = "time limit"
            break
        if a.stop_after and step >= start_step + a.stop_after:
            stop_reason = "stop-after"
            break
        if not planned and t_plan is None and step >= PLAN_AT // 3:
            t_plan = (step, elapsed)
        elif not planned and t_plan is not None and step - t_plan[0] >= PLAN_AT - PLAN_AT // 3:
            per_step = (elapsed - t_plan[1]) / (step - t_plan[0])
            planned = max(PLAN_AT + 1, min(a.max_steps, int(PLAN_AT + (a.time_budget - elapsed) / per_step)))
            print(f"train_tiny: {per_step * 1000:.1f} ms a step: planned {planned} steps "
                  f"({planned * a.batch * a.seq / 1e6:.1f} M tokens); repeat with --steps {planned}", flush=True)
            log.write(json.dumps({"planned_steps": planned, "ms_per_step": round(per_step * 1000, 2)}) + "\n")
        t0 = time.time()
        dense = not planned or step < a.indexer_dense_frac * planned
        for ix in taps.indexers():
            ix.index_topk = 1 << 30 if dense else sparse_topk
        lr = lr_at(step, planned or 10 ** 9, a.lr)
        for g in opt.param_groups:
            g["lr"] = lr
        w = batch_at(data, step, a.seed, a.batch, a.seq, device)
        ids = w[:, :-1]
        taps.kl_terms.clear()
        taps.kl_on = bool(taps.csa) and not taps.indexer_loss_broken
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            logits = model(input_ids=ids, use_cache=False).logits
            loss_main = F.cross_entropy(logits.float().reshape(-1, vocab), w[:, 1:].reshape(-1))
            logits2 = mtp_logits(model, mtp, taps, ids)
            loss_mtp = F.cross_entropy(logits2.float().reshape(-1, vocab), w[:, 2:].reshape(-1))
        taps.kl_on = False
        loss_idx = torch.stack(taps.kl_terms).mean() if taps.kl_terms else torch.zeros((), device=device)
        loss = loss_main + a.mtp_weight * loss_mtp + loss_idx
        if not torch.isfinite(loss):
            save(False)
            raise SystemExit(f"train_tiny: loss is {loss.item()} at step {step} (checkpoint of this step kept)")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(groups["decay"] + groups["no_decay"], 1.0)
        if groups["indexer"]:
            torch.nn.utils.clip_grad_norm_(groups["indexer"], 1.0)
        opt.step()
        load = taps.take_load()
        with torch.no_grad():
            for name, router in taps.learned:
                l = load[name]
                router.e_score_correction_bias.add_(a.bias_update * torch.sign(l.mean() - l).to(router.e_score_correction_bias.dtype))
        step += 1
        tokens += ids.numel()
        tok_window += ids.numel()
        if device == "cuda":
            torch.cuda.synchronize()  # so that elapsed is GPU time, which the plan needs
        elapsed += time.time() - t0
        if step % a.log_every == 0 or step == planned:
            now = time.time()
            balance = {n: round(float(load[n].max() / load[n].mean().clamp_min(1e-9)), 3) for n, _ in taps.learned}
            rec = dict(step=step, tokens=tokens, elapsed=round(elapsed, 1), lr=lr, loss=round(loss_main.item(), 4),
                       mtp_loss=round(loss_mtp.item(), 4), indexer_kl=round(float(loss_idx), 4),
                       grad_norm=round(float(gnorm), 3), tokens_per_s=round(tok_window / max(now - t_window, 1e-9)),
                       max_over_mean_load=balance, index_topk="dense" if dense else sparse_topk)
            t_window, tok_window = now, 0
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print("train_tiny:", json.dumps(rec), flush=True)
        if time.time() - t_last_ckpt >= a.checkpoint_seconds:
            save(False)
            t_last_ckpt = time.time()
    for ix in taps.indexers():
        ix.index_topk = sparse_topk
    save(stop_reason != "stop-after")
    summary = dict(step=step, planned=planned, stop=stop_reason, repeat_with=f"--steps {planned}" if planned else None,
                   repeatable=stop_reason == "steps", tokens=tokens, elapsed=round(elapsed, 1),
                   trunk_parameters=n_params, mtp_parameters=n_mtp)
    log.write(json.dumps({"summary": summary}) + "\n")
    log.close()
    print("train_tiny: done", json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
