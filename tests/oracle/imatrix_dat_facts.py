#!/usr/bin/env python3
"""Facts of a legacy llama-imatrix .dat file, read with nothing but struct, for the reader
test tests/unit/quant/imatrix_llama_file_test.cpp (the numbers it asserts came from here).
Layout: int32 entry count; per entry int32 name length, name, int32 ncall, int32 nval,
nval float32 (E[x^2] * ncall); then optionally int32 last chunk count, int32 dataset
name length, dataset name.
usage: imatrix_dat_facts.py FILE[.zst]"""
import struct
import subprocess
import sys

path = sys.argv[1]
data = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout if path.endswith(".zst") \
    else open(path, "rb").read()
n, = struct.unpack_from("<i", data, 0)
off = 4
entries = []
for _ in range(n):
    length, = struct.unpack_from("<i", data, off); off += 4
    name = data[off:off + length].decode(); off += length
    ncall, nval = struct.unpack_from("<ii", data, off); off += 8
    values = struct.unpack_from(f"<{nval}f", data, off); off += 4 * nval
    entries.append((name, ncall, values))
print("bytes", len(data), "entries", n)
if off + 4 <= len(data):
    print("chunks", struct.unpack_from("<i", data, off)[0]); off += 4
    length, = struct.unpack_from("<i", data, off); off += 4
    print("dataset", data[off:off + length].decode())
print("first", entries[0][0], "ncall", entries[0][1], "nval", len(entries[0][2]))
for name in ("blk.0.ffn_down.weight", "blk.21.attn_q.weight"):
    e = next(e for e in entries if e[0] == name)
    v = e[2]
    print(name, "ncall", e[1], "nval", len(v), "v[0] %.9g" % v[0], "v[-1] %.9g" % v[-1],
          "sum %.6f" % sum(v), "min %.9g" % min(v), "negative", sum(1 for x in v if x < 0))
print("all finite and >= 0:", all(x >= 0 and x == x and x != float("inf") for e in entries for x in e[2]))
