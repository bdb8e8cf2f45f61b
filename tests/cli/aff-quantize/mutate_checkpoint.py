#!/usr/bin/env python3
"""Copies a checkpoint directory (config.json + one model.safetensors) with one defect,
for the aff-quantize cases that must refuse inconsistent checkpoints.

usage: mutate_checkpoint.py SRC OUT drop NAME          leave tensor NAME out
       mutate_checkpoint.py SRC OUT fill NAME HEX      every element of NAME := the bytes HEX
       mutate_checkpoint.py SRC OUT first NAME HEX     the first element of NAME := HEX
       mutate_checkpoint.py SRC OUT config KEY JSON    config.json's KEY := JSON
"""
import json
import os
import struct
import sys

src, out, op, *args = sys.argv[1:]
os.makedirs(out, exist_ok=True)
config = json.load(open(f"{src}/config.json"))
raw = open(f"{src}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header.pop("__metadata__", None)
data = {k: bytearray(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in header.items()}

if op == "drop":
    del header[args[0]], data[args[0]]
elif op in ("fill", "first"):
    value = bytes.fromhex(args[1])
    buf = data[args[0]]
    count = len(buf) // len(value) if op == "fill" else 1
    buf[:count * len(value)] = value * count
elif op == "config":
    config[args[0]] = json.loads(args[1])
else:
    sys.exit("unknown operation " + op)

offset, body = 0, b""
for k in header:
    header[k]["data_offsets"] = [offset, offset + len(data[k])]
    offset += len(data[k])
    body += bytes(data[k])
if meta is not None:
    header["__metadata__"] = meta
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(f"{out}/model.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + body)
json.dump(config, open(f"{out}/config.json", "w"), indent=1)
