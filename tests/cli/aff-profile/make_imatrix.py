#!/usr/bin/env python3
"""Writes small llama.cpp-style imatrix files for the aff-profile CLI tests.

usage: make_imatrix.py gguf OUT   (2 MoE layers x 4 experts + one dense tensor)
       make_imatrix.py foreign OUT    (the same plus blk.0.attn_qkv, a matrix DeepSeek-V4 lacks)
       make_imatrix.py gguf OUT LAYERS EXPERTS COLS DOWN_COLS   (that geometry instead)
       make_imatrix.py dat OUT    (the legacy form of one expert tensor)
       make_imatrix.py hostile OUT    (foreign, the foreign name holding terminal escapes)

GGUF layout as llama-imatrix writes it: general.type = "imatrix", imatrix.datasets,
imatrix.chunk_count; per tensor <name>.in_sum2 F32 [cols, experts] and <name>.counts
F32 [1, experts]; data aligned to 32 bytes.
"""
import struct
import sys


def gguf(path, layers=None, experts=4, cols=16, down_cols=8, foreign=False, foreign_name="blk.0.attn_qkv.weight"):
    experts, cols, down_cols = int(experts), int(cols), int(down_cols)
    counts = {0: [40, 10, 0, 30], 1: [5, 5, 60, 10]}
    if layers is not None:
        counts = {l: [(7 * l + 3 * e) % 11 for e in range(experts)] for l in range(int(layers))}
    tensors = []
    for layer, c in counts.items():
        for kind in ("gate", "up", "down"):
            n = down_cols if kind == "down" else cols
            name = f"blk.{layer}.ffn_{kind}_exps.weight"
            tensors.append((name + ".in_sum2", [n, experts], [float(k) for k in c for _ in range(n)]))
            tensors.append((name + ".counts", [1, experts], [float(k) for k in c]))
    tensors.append(("blk.0.attn_q_a.weight.in_sum2", [16, 1], [1.0] * 16))
    tensors.append(("blk.0.attn_q_a.weight.counts", [1, 1], [3.0]))
    if foreign:  # a fused QKV matrix: llama.cpp has the name, DeepSeek-V4 no such tensor
        tensors.append((foreign_name + ".in_sum2", [16, 1], [1.0] * 16))
        tensors.append((foreign_name + ".counts", [1, 1], [3.0]))

    def s(text):
        b = text.encode()
        return struct.pack("<Q", len(b)) + b

    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 3)
    out += s("general.type") + struct.pack("<I", 8) + s("imatrix")
    out += s("imatrix.datasets") + struct.pack("<IIQ", 9, 8, 1) + s("calibration.txt")
    out += s("imatrix.chunk_count") + struct.pack("<II", 4, 100)
    offset = 0
    for name, ne, data in tensors:
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", 0, offset)
        offset += (4 * len(data) + 31) // 32 * 32
    out += b"\0" * (-len(out) % 32)
    for _, _, data in tensors:
        out += struct.pack(f"<{len(data)}f", *data)
        out += b"\0" * (-len(out) % 32)
    open(path, "wb").write(out)


def dat(path):
    name = b"blk.0.ffn_up_exps.weight"
    values = [1.0] * 64
    out = struct.pack("<i", 1) + struct.pack("<i", len(name)) + name + struct.pack("<ii", 10, len(values))
    out += struct.pack(f"<{len(values)}f", *values) + struct.pack("<i", 10) + struct.pack("<i", 4) + b"wiki"
    open(path, "wb").write(out)


def foreign(path):
    gguf(path, foreign=True)


def hostile(path):
    # OSC 0 (set the window title), BEL, then "clear the screen": what a crafted name could do.
    gguf(path, foreign=True, foreign_name="blk.0.\x1b]0;pwned\x07\x1b[2Jattn_qkv.weight")


{"gguf": gguf, "foreign": foreign, "dat": dat, "hostile": hostile}[sys.argv[1]](*sys.argv[2:])
