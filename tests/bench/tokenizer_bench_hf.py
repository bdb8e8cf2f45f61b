#!/usr/bin/env python3
"""The peer for tokenizer_bench.cpp: Hugging Face `tokenizers` on the same input, single
thread (run with TOKENIZERS_PARALLELISM=false): the whole corpus as one string, then line
by line through encode_batch (no Python loop overhead) and through a Python loop.
usage: TOKENIZERS_PARALLELISM=false tokenizer_bench_hf.py TOKENIZER_JSON CORPUS_BIN [REPEATS]
"""
import struct
import sys
import time

import tokenizers


def main():
    tok = tokenizers.Tokenizer.from_file(sys.argv[1])
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    data = open(sys.argv[2], "rb").read()
    parts, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        parts.append(data[pos + 4:pos + 4 + n].decode("utf-8", "replace") + "\n")
        pos += 4 + n
    text = "".join(parts)
    size = len(text.encode("utf-8"))
    lines = text.splitlines(keepends=True)
    lines = []
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        lines.append(text[start:end])
        start = end

    def run(name, body):
        best, tokens = 1e30, 0
        for _ in range(repeats):
            t = time.perf_counter()
            tokens = body()
            best = min(best, time.perf_counter() - t)
        print(f"hf  {name:<10} {tokens:9d} tokens  {best:.4f} s  {size / best / 1e6:.2f} MB/s")

    print(f"tokenizers {tokenizers.__version__}; corpus {size} bytes, {len(lines)} lines")
    run("whole", lambda: len(tok.encode(text, add_special_tokens=False).ids))
    run("per-line", lambda: sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False)))
    run("py-loop", lambda: sum(len(tok.encode(l, add_special_tokens=False).ids) for l in lines))


if __name__ == "__main__":
    main()
