#!/usr/bin/env python3
"""Writes checkpoint directories for the aff-quantize CLI tests.

usage: make_checkpoint.py big DATA OUT [WIDTH]
    one sliding-attention layer of 4 routed experts of WIDTH x WIDTH BF16 (default 1024:
    slow enough to interrupt), tiny-b's config otherwise, with every dense tensor the
    config calls for, so the checkpoint is complete (aff-quantize checks that first)
"""
import json
import struct
import sys


def big(data, out, width="1024"):
    import os
    w = int(width)
    cfg = json.load(open(f"{data}/models/tiny-b/config.json"))
    cfg.update(num_hidden_layers=1, layer_types=["sliding_attention"], mlp_layer_types=["moe"],
               hidden_size=w, moe_intermediate_size=w, n_routed_experts=4, num_nextn_predict_layers=0)
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(f"{out}/config.json", "w"), indent=1)
    D, V, n, E, I = w, cfg["vocab_size"], cfg["hc_mult"], 4, w
    H, Dh, Rq, G, Ro = cfg["num_attention_heads"], cfg["head_dim"], cfg["q_lora_rank"], cfg["o_groups"], cfg["o_lora_rank"]
    mix = (2 + n) * n
    # BF16 values of varied magnitude and sign (no NaN or infinity): one pattern of
    # 1024 values repeated; the quantiser's speed does not depend on the values.
    x, pattern = 12345, bytearray()
    for _ in range(1024):
        x = (x * 1103515245 + 12345) % (1 << 31)
        pattern += struct.pack("<H", 0x3C00 + (x >> 16) % 0x400 | (0x8000 if x & 0x100 else 0))

    def values(count):
        return (bytes(pattern) * (count // 1024 + 1))[:2 * count]

    shapes = {"embed.weight": [V, D], "head.weight": [V, D], "norm.weight": [D],
              "hc_head_fn": [n, n * D], "hc_head_base": [n], "hc_head_scale": [1]}
    p = "layers.0."
    shapes.update({p + "attn_norm.weight": [D], p + "ffn_norm.weight": [D]})
    for site in ("attn", "ffn"):
        shapes.update({p + f"hc_{site}_fn": [mix, n * D], p + f"hc_{site}_base": [mix], p + f"hc_{site}_scale": [3]})
    a = p + "attn."
    shapes.update({a + "attn_sink": [H], a + "wq_a.weight": [Rq, D], a + "q_norm.weight": [Rq],
                   a + "wq_b.weight": [H * Dh, Rq], a + "wkv.weight": [Dh, D], a + "kv_norm.weight": [Dh],
                   a + "wo_a.weight": [G * Ro, H * Dh // G], a + "wo_b.weight": [D, G * Ro]})
    f = p + "ffn."
    shapes.update({f + "gate.weight": [E, D], f + "gate.bias": [E], f + "shared_experts.w1.weight": [I, D],
                   f + "shared_experts.w2.weight": [D, I], f + "shared_experts.w3.weight": [I, D]})
    for e in range(E):
        for m in ("w1", "w2", "w3"):
            shapes[f + f"experts.{e}.{m}.weight"] = [D, I] if m == "w2" else [I, D]
    header, offset = {}, 0
    for name, shape in shapes.items():
        count = 1
        for d in shape:
            count *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + 2 * count]}
        offset += 2 * count
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(f"{out}/model.safetensors", "wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text)
        for name, shape in shapes.items():
            count = 1
            for d in shape:
                count *= d
            fh.write(values(count))


{"big": big}[sys.argv[1]](*sys.argv[2:])
