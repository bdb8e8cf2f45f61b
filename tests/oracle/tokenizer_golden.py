#!/usr/bin/env python3
"""Runs Hugging Face `tokenizers` (the oracle) over the tokenizer corpus and writes the
golden data the C++ tests compare with, byte for byte.

Each corpus document (raw bytes, maybe ill-formed UTF-8) is first decoded with
errors="replace", which is libaff's documented behaviour for ill-formed input.

usage: tokenizer_golden.py TOKENIZER_JSON CORPUS_BIN OUT_DIR
Writes OUT_DIR/golden.bin, per document in corpus order:
  u32 n, n x u32   ids of tok.encode(text, add_special_tokens=False)
  u32 m, m x u32   ids with no added tokens recognised (added_tokens removed from the JSON)
  u32 flags        bit 0: tok.decode(ids, skip_special_tokens=False) == text
  u32 len, bytes   tok.decode(ids, skip_special_tokens=False) when bit 0 is clear
  u32 len, bytes   tok.decode(ids, skip_special_tokens=True)
and OUT_DIR/windows.bin: records u32 k, k x u32 ids (a random slice of some document's
ids, often cutting a character), u32 len, bytes of tok.decode(slice, skip_special_tokens=False).
All integers little-endian.
"""
import json
import random
import struct
import sys

import tokenizers


def read_corpus(path):
    docs = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        docs.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    return docs


def u32s(xs):
    return struct.pack("<I", len(xs)) + struct.pack(f"<{len(xs)}I", *xs)


def blob(b):
    return struct.pack("<I", len(b)) + b


def main():
    tok_path, corpus_path, out_dir = sys.argv[1:4]
    print("tokenizers", tokenizers.__version__, file=sys.stderr)
    tok = tokenizers.Tokenizer.from_file(tok_path)
    spec = json.load(open(tok_path, encoding="utf-8"))
    spec["added_tokens"] = []
    plain = tokenizers.Tokenizer.from_str(json.dumps(spec))
    docs = read_corpus(corpus_path)
    rng = random.Random(7)
    mismatched_round_trips = 0
    with open(f"{out_dir}/golden.bin", "wb") as g, open(f"{out_dir}/windows.bin", "wb") as w:
        for i, raw in enumerate(docs):
            text = raw.decode("utf-8", "replace")
            ids = tok.encode(text, add_special_tokens=False).ids
            pids = plain.encode(text, add_special_tokens=False).ids
            dec = tok.decode(ids, skip_special_tokens=False)
            dec_skip = tok.decode(ids, skip_special_tokens=True)
            same = dec == text
            mismatched_round_trips += not same
            g.write(u32s(ids) + u32s(pids) + struct.pack("<I", 1 if same else 0))
            if not same:
                g.write(blob(dec.encode("utf-8")))
            g.write(blob(dec_skip.encode("utf-8")))
            if len(ids) >= 2 and i % 3 == 0:
                for _ in range(3):
                    a = rng.randrange(len(ids))
                    b = rng.randrange(a, min(len(ids), a + 12) + 1)
                    window = ids[a:b]
                    w.write(u32s(window) + blob(tok.decode(window, skip_special_tokens=False).encode("utf-8")))
    print(f"{len(docs)} documents; decode(encode(x)) != x for {mismatched_round_trips}", file=sys.stderr)


if __name__ == "__main__":
    main()
