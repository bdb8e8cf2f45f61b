#!/usr/bin/env python3
# Reads a DeepSeek-V4 checkpoint directory as the oracles need it: every tensor dequantised
# (FP8 E4M3 with E8M0 block scales, packed FP4 E2M1 with E8M0 per-32 scales, BF16, F32, I64),
# under the official names (model doc §2.2-§2.3), whichever naming the files use (official, or
# transformers' with fused experts, §2.7); and maps official names to transformers' for loading
# DeepseekV4ForCausalLM. The safetensors files are parsed here, not by a library, so every dtype
# of the official layout is read the same way on any torch version.
import json
import os
import re
import struct

import torch


def _e4m3_table():
    t = []
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 15, b & 7
        if e == 15 and m == 7:
            t.append(float("nan"))
        elif e == 0:
            t.append(s * m / 8.0 * 2.0 ** -6)
        else:
            t.append(s * (1 + m / 8.0) * 2.0 ** (e - 7))
    return torch.tensor(t, dtype=torch.float64)


E4M3 = _e4m3_table()
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64)


def read_safetensors(path):
    """name -> (dtype string, shape, raw bytes)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = (info["dtype"], tuple(info["shape"]), data[a:b])
    return out


def _plain(dtype, shape, raw):
    if dtype == "BF16":
        t = torch.frombuffer(bytearray(raw), dtype=torch.int16).view(torch.bfloat16).double()
    elif dtype == "F32":
        t = torch.frombuffer(bytearray(raw), dtype=torch.float32).double()
    elif dtype == "F16":
        t = torch.frombuffer(bytearray(raw), dtype=torch.float16).double()
    elif dtype == "I64":
        t = torch.frombuffer(bytearray(raw), dtype=torch.int64).clone()
    elif dtype == "I32":
        t = torch.frombuffer(bytearray(raw), dtype=torch.int32).long()
    else:
        raise ValueError(f"dtype {dtype} is not a plain dtype")
    return t.reshape(shape)


def _u8(raw, shape):
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).long().reshape(shape)


def dequantise(raw_tensors):
    """Every weight as float64 (ints as int64), scale tensors folded into their weights."""
    out = {}
    for name, (dtype, shape, raw) in raw_tensors.items():
        if name.endswith(".scale") or name.endswith(".weight_scale_inv"):
            continue
        stem = name[: -len(".weight")] if name.endswith(".weight") else None
        scale = None
        for suffix in (".scale", ".weight_scale_inv"):
            if stem and stem + suffix in raw_tensors:
                scale = raw_tensors[stem + suffix]
        if dtype == "F8_E4M3":
            w = E4M3[_u8(raw, shape)]
            sd, ss, sr = scale
            s = 2.0 ** (_u8(sr, ss).double() - 127) if sd == "F8_E8M0" else _plain(sd, ss, sr)
            s = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[: shape[0], : shape[1]]
            out[name] = w * s
        elif dtype in ("I8", "U8") and scale is not None:  # packed FP4, two codes a byte
            b = _u8(raw, shape)
            codes = torch.stack([b & 15, b >> 4], dim=-1).reshape(shape[0], shape[1] * 2)
            sd, ss, sr = scale
            s = 2.0 ** (_u8(sr, ss).double() - 127) if sd == "F8_E8M0" else _plain(sd, ss, sr)
            out[name] = E2M1[codes] * s.repeat_interleave(32, 1)
        else:
            out[name] = _plain(dtype, shape, raw)
    return out


def read_checkpoint(d):
    raw = {}
    index = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    for f in files:
        raw.update(read_safetensors(os.path.join(d, f)))
    return to_official(dequantise(raw))


# official -> transformers, per-layer suffix rules (model doc §2.7); experts are fused separately.
_LAYER_RULES = [
    ("attn_norm.weight", "input_layernorm.weight"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("hc_attn_fn", "attn_hc.fn"), ("hc_attn_base", "attn_hc.base"), ("hc_attn_scale", "attn_hc.scale"),
    ("hc_ffn_fn", "ffn_hc.fn"), ("hc_ffn_base", "ffn_hc.base"), ("hc_ffn_scale", "ffn_hc.scale"),
    ("attn.attn_sink", "self_attn.sinks"),
    ("attn.wq_a.weight", "self_attn.q_a_proj.weight"),
    ("attn.q_norm.weight", "self_attn.q_a_norm.weight"),
    ("attn.wq_b.weight", "self_attn.q_b_proj.weight"),
    ("attn.wkv.weight", "self_attn.kv_proj.weight"),
    ("attn.kv_norm.weight", "self_attn.kv_norm.weight"),
    ("attn.wo_a.weight", "self_attn.o_a_proj.weight"),
    ("attn.wo_b.weight", "self_attn.o_b_proj.weight"),
    ("attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"),
    ("attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"),
    ("attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"),
    ("attn.compressor.ape", "self_attn.compressor.position_bias"),
    ("attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"),
    ("attn.indexer.weights_proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"),
    ("attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"),
    ("attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"),
    ("attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"),
    ("attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"),
    ("ffn.gate.weight", "mlp.gate.weight"),
    ("ffn.gate.bias", "mlp.gate.e_score_correction_bias"),
    ("ffn.gate.tid2eid", "mlp.gate.tid2eid"),
    ("ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"),
    ("ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"),
    ("ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"),
]
_GLOBAL_RULES = [
    ("embed.weight", "model.embed_tokens.weight"), ("head.weight", "lm_head.weight"),
    ("norm.weight", "model.norm.weight"), ("hc_head_fn", "model.hc_head.hc_fn"),
    ("hc_head_base", "model.hc_head.hc_base"), ("hc_head_scale", "model.hc_head.hc_scale"),
]


def to_transformers(off):
    """Official names -> DeepseekV4ForCausalLM state dict (fused gate_up_proj [E, 2I, D], down_proj [E, D, I])."""
    tf = {}
    g = dict(_GLOBAL_RULES)
    experts = {}
    for name, t in off.items():
        if name in g:
            tf[g[name]] = t
            continue
        m = re.match(r"layers\.(\d+)\.(.*)$", name)
        if not m:
            raise KeyError(f"to_transformers: unexpected tensor {name}")
        layer, rest = int(m.group(1)), m.group(2)
        e = re.match(r"ffn\.experts\.(\d+)\.(w[123])\.weight$", rest)
        if e:
            experts.setdefault(layer, {})[(int(e.group(1)), e.group(2))] = t
            continue
        for a, b in _LAYER_RULES:
            if rest == a:
                tf[f"model.layers.{layer}.{b}"] = t
                break
        else:
            raise KeyError(f"to_transformers: no rule for {name}")
    for layer, ex in experts.items():
        E = 1 + max(i for i, _ in ex)
        tf[f"model.layers.{layer}.mlp.experts.gate_up_proj"] = torch.stack(
            [torch.cat([ex[(i, "w1")], ex[(i, "w3")]], 0) for i in range(E)])
        tf[f"model.layers.{layer}.mlp.experts.down_proj"] = torch.stack([ex[(i, "w2")] for i in range(E)])
    return tf


def to_official(sd):
    """Either naming -> official names (split fused experts, strip a leading 'model.'): a
    transformers save in the original format keeps official names behind 'model.'."""
    g = {b: a for a, b in _GLOBAL_RULES}
    official_globals = {a for a, _ in _GLOBAL_RULES}
    official_layer = {a for a, _ in _LAYER_RULES}
    rules = {b: a for a, b in _LAYER_RULES}
    off = {}
    for name, t in sd.items():
        bare = name[len("model."):] if name.startswith("model.") else name
        if bare in official_globals or name in official_globals:
            off[bare] = t
            continue
        if name in g or "model." + name in g:
            off[g.get(name, g.get("model." + name))] = t
            continue
        m = re.match(r"layers\.(\d+)\.(.*)$", bare)
        if not m:
            if bare.startswith("mtp."):
                off[bare] = t
                continue
            raise KeyError(f"to_official: unexpected tensor {name}")
        layer, rest = int(m.group(1)), m.group(2)
        if rest in official_layer or re.match(r"ffn\.experts\.\d+\.w[123]\.weight$", rest):
            off[f"layers.{layer}.{rest}"] = t
        elif rest == "mlp.experts.gate_up_proj":
            I = t.shape[1] // 2
            for e in range(t.shape[0]):
                off[f"layers.{layer}.ffn.experts.{e}.w1.weight"] = t[e, :I]
                off[f"layers.{layer}.ffn.experts.{e}.w3.weight"] = t[e, I:]
        elif rest == "mlp.experts.down_proj":
            for e in range(t.shape[0]):
                off[f"layers.{layer}.ffn.experts.{e}.w2.weight"] = t[e]
        elif rest in rules:
            off[f"layers.{layer}.{rules[rest]}"] = t
        else:
            raise KeyError(f"to_official: no rule for {name}")
    return off
