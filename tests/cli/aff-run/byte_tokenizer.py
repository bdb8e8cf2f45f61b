#!/usr/bin/env python3
"""Writes a byte-level tokenizer.json for the 256-token fixtures: one token per byte, no
merges, ids 0..255 in GPT-2's byte-to-unicode order.

usage: byte_tokenizer.py OUT [--lacking ID]
  --lacking ID: the byte that had id ID gets id 256 instead, so the model's id ID has no
                text in the tokenizer (DeepSeek's embedding has such ids past its tokenizer)
"""
import json
import sys

bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
if len(sys.argv) > 3 and sys.argv[2] == "--lacking":
    lacking = int(sys.argv[3])
    for k, v in vocab.items():
        if v == lacking:
            vocab[k] = 256
json.dump({"added_tokens": [], "decoder": {"type": "ByteLevel"},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
           "model": {"type": "BPE", "vocab": vocab, "merges": []}}, open(sys.argv[1], "w"))
