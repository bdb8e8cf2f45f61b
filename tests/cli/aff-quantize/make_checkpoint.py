#!/usr/bin/env python3
"""Writes checkpoint directories for the aff-quantize CLI tests.

usage: make_checkpoint.py big DATA OUT   one layer of 4 routed experts of 1024 x 1024 BF16
                                         (tiny-b's config otherwise): slow enough to interrupt
"""
import json
import struct
import sys


def big(data, out):
    import os
    cfg = json.load(open(f"{data}/models/tiny-b/config.json"))
    cfg.update(num_hidden_layers=1, layer_types=["sliding_attention"], mlp_layer_types=["moe"],
               hidden_size=1024, moe_intermediate_size=1024, n_routed_experts=4)
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(f"{out}/config.json", "w"), indent=1)
    # BF16 values of varied magnitude and sign (no NaN or infinity), one 1024-value row
    # pattern repeated: the quantiser's speed does not depend on the values.
    x, row = 12345, bytearray()
    for _ in range(1024):
        x = (x * 1103515245 + 12345) % (1 << 31)
        row += struct.pack("<H", 0x3C00 + (x >> 16) % 0x400 | (0x8000 if x & 0x100 else 0))
    matrix = bytes(row) * 1024
    header, offset, names = {}, 0, []
    for e in range(4):
        for w in ("w1", "w2", "w3"):
            name = f"layers.0.ffn.experts.{e}.{w}.weight"
            header[name] = {"dtype": "BF16", "shape": [1024, 1024], "data_offsets": [offset, offset + len(matrix)]}
            offset += len(matrix)
            names.append(name)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(f"{out}/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _ in names:
            f.write(matrix)


{"big": big}[sys.argv[1]](*sys.argv[2:])
