#!/usr/bin/env python3
"""An independent reader of route traces, written from formats/route-trace.md alone: if it
and libaff/trace agree on a trace, the spec is enough to write a reader. Standard library
only, plus the XXH3-64 of read_aff.py (the published algorithm) for the digests; zstd chunks
(codec 1) are decoded by the `zstd` command, which must then be on PATH.

usage: read_route_trace.py FILE
Prints, as JSON, the integer fields that `aff-trace summary --json` also prints (the same
keys, so that a test can require each of them to be equal), or "FILE: rejected: REASON"
with exit status 1.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_aff import xxh3_64  # noqa: E402

MAGIC = bytes([0x89, 0x41, 0x46, 0x54, 0x0D, 0x0A, 0x1A, 0x0A])
PHASES = ("prefill", "decode", "draft-verify", "replay", "draft")
DRAFT = 4


class Reject(Exception):
    pass


def u(b, o, n):
    if o + n > len(b):
        raise Reject("truncated")
    return int.from_bytes(b[o:o + n], "little")


def read_header(b):
    if len(b) < 64:
        raise Reject("truncated header")
    if b[:8] != MAGIC:
        raise Reject("bad magic")
    if u(b, 8, 4) != 1:
        raise Reject("version %d" % u(b, 8, 4))
    layers, experts, k = u(b, 12, 4), u(b, 16, 4), u(b, 20, 4)
    if not 1 <= layers <= 4096 or not 1 <= experts <= 65536 or not 1 <= k <= min(experts, 64):
        raise Reject("geometry out of range")
    size = 64 + 8 * ((layers + 7) // 8)
    if len(b) < size:
        raise Reject("truncated header")
    if u(b, 24, 4) > 3 or u(b, 28, 4) != 0 or u(b, 48, 8) != 0:
        raise Reject("header field")
    flags = b[56:56 + layers]
    if any(f & 0xFE for f in flags) or any(b[56 + layers:size - 8]):
        raise Reject("reserved header bits")
    if xxh3_64(b[:size - 8]) != u(b, size - 8, 8):
        raise Reject("header digest")
    return dict(layers=layers, experts=experts, k=k, kind=u(b, 24, 4), identity=u(b, 32, 8),
                expert_bytes=u(b, 40, 8), hash=[f & 1 for f in flags]), size


def unzstd(data, raw_size):
    if shutil.which("zstd") is None:
        raise Reject("codec 1 chunk but no zstd command on PATH")
    out = subprocess.run(["zstd", "-dcq"], input=data, capture_output=True)
    if out.returncode != 0 or len(out.stdout) != raw_size:
        raise Reject("zstd frame does not decode to raw_size")
    return out.stdout


def read_steps(h, p, count, steps):
    k, at = h["k"], 0
    for _ in range(count):
        n, m = u(p, at, 4), u(p, at + 4, 2)
        draft = u(p, at + 8 + 12, 1) == DRAFT  # the first token's phase: a step of the draft layers
        if not 1 <= n <= 65536 or not 1 <= m <= (16 if draft else h["layers"]) or u(p, at + 6, 2):
            raise Reject("step header")
        at += 8
        toks = []
        for _i in range(n):
            tok, seq, pos, phase = u(p, at, 4), u(p, at + 4, 4), u(p, at + 8, 4), u(p, at + 12, 1)
            if phase >= len(PHASES) or u(p, at + 13, 3) or (phase == DRAFT) != draft:
                raise Reject("token entry")
            toks.append((tok, seq, pos, phase))
            at += 16
        blocks, prev = [], -1
        for blk in range(m):
            layer = u(p, at, 2)
            # A draft step's block blk is layer L + blk (the MTP layer L; DSpark's stages L, L + 1, L + 2).
            if (layer != h["layers"] + blk if draft else layer >= h["layers"]) or layer <= prev or u(p, at + 2, 2):
                raise Reject("layer block")
            prev = layer
            ids = [u(p, at + 4 + 2 * j, 2) for j in range(n * k)]
            if any(e >= h["experts"] for e in ids):
                raise Reject("expert id out of range")
            wbytes = p[at + 4 + 2 * n * k: at + 4 + 6 * n * k]
            if len(wbytes) != 4 * n * k:
                raise Reject("truncated")
            if not all(math.isfinite(w) for w in struct.unpack("<%df" % (n * k), wbytes)):
                raise Reject("weight not finite")
            blocks.append((layer, ids))
            at += 4 + 6 * n * k
        steps.append((toks, blocks))
    if at != len(p):
        raise Reject("bytes left over in chunk")


def read_trace(b):
    h, at = read_header(b)
    steps, chunks = [], 0
    while True:
        tag = b[at:at + 4]
        if len(tag) < 4:
            raise Reject("truncated: no end record")
        if tag == b"RTND":
            break
        if tag != b"RTCK":
            raise Reject("bad chunk tag")
        codec, count, first = u(b, at + 4, 4), u(b, at + 8, 4), u(b, at + 16, 8)
        stored, raw = u(b, at + 24, 8), u(b, at + 32, 8)
        if codec > 1 or not 1 <= count <= 1 << 24 or u(b, at + 12, 4) or first != len(steps):
            raise Reject("chunk header")
        if not 1 <= stored <= 1 << 27 or not 1 <= raw <= 1 << 26 or (codec == 0 and raw != stored):
            raise Reject("chunk sizes")
        body = b[at + 48:at + 48 + stored]
        if len(body) != stored:
            raise Reject("truncated chunk")
        if xxh3_64(b[at:at + 40] + body) != u(b, at + 40, 8):
            raise Reject("chunk digest")
        read_steps(h, unzstd(body, raw) if codec == 1 else body, count, steps)
        at += 48 + stored
        chunks += 1
    e = b[at:at + 48]
    if len(e) < 48:
        raise Reject("truncated end record")
    if xxh3_64(e[:40]) != u(e, 40, 8) or u(e, 4, 4) or u(e, 32, 8):
        raise Reject("end record")
    if (u(e, 8, 8), u(e, 16, 8), u(e, 24, 8)) != (chunks, len(steps), sum(len(t) for t, _ in steps)):
        raise Reject("end record counts")
    if len(b) != at + 48:
        raise Reject("trailing bytes")
    return h, steps


KINDS = ("none", "container", "checkpoint", "synthetic")


def layer_stats(h, counts, pairs, shared):
    out = []
    for layer in range(h["layers"]):
        c = counts[layer]
        total, top = sum(c), max(c)
        desc = sorted(c, reverse=True)

        def cover(num):
            cum = 0
            for i, x in enumerate(desc):
                if cum * 100 >= total * num:
                    return i
                cum += x
            return len(desc)
        out.append({"layer": layer, "hash": bool(h["hash"][layer]), "selections": total,
                    "used": sum(1 for x in c if x), "busiest": c.index(top) if top else 0, "busiest_count": top,
                    "cover90": cover(90) if total else 0, "cover99": cover(99) if total else 0,
                    "pairs": pairs[layer], "shared": shared[layer]})
    return out


def summary(h, steps):
    """The integer fields of aff-trace summary --json, computed as formats/route-trace.md and
    aff-trace(1) define them: per layer selections, experts used, the busiest expert (lowest id
    on ties), the fewest experts covering 90 %/99 % of selections, and consecutive-token pairs
    of a sequence with the distinct experts they share; over all tokens and per phase."""
    L, E = h["layers"], h["experts"]

    def fresh():
        return {"tokens": 0, "counts": [[0] * E for _ in range(L)], "pairs": [0] * L, "shared": [0] * L}
    acc = {"all": fresh(), **{p: fresh() for p in range(len(PHASES))}}
    last = {}
    for toks, blocks in steps:
        for i, (_tok, seq, _pos, phase) in enumerate(toks):
            a, p = acc["all"], acc[phase]
            a["tokens"] += 1
            p["tokens"] += 1
            prev = last.setdefault(seq, [None] * L)
            if phase == DRAFT:
                continue  # the draft layer's routing: counted as tokens only
            for layer, ids in blocks:
                sel = ids[i * h["k"]:(i + 1) * h["k"]]
                for e in sel:
                    a["counts"][layer][e] += 1
                    p["counts"][layer][e] += 1
                now = set(sel)
                if prev[layer] is not None:
                    common = len(now & prev[layer])
                    for x in (a, p):
                        x["pairs"][layer] += 1
                        x["shared"][layer] += common
                prev[layer] = now
    out = {"layers": L, "experts": E, "top_k": h["k"],
           "hash_layers": [i for i, f in enumerate(h["hash"]) if f], "expert_bytes": h["expert_bytes"],
           "identity_kind": KINDS[h["kind"]], "identity": "%016x" % h["identity"],
           "steps": len(steps), "token_steps": acc["all"]["tokens"], "sequences": len(last),
           "per_layer": layer_stats(h, acc["all"]["counts"], acc["all"]["pairs"], acc["all"]["shared"]),
           "phases": {}}
    for phase in range(len(PHASES)):
        x = acc[phase]
        if x["tokens"]:
            out["phases"][PHASES[phase]] = {"tokens": x["tokens"], "per_layer": [] if phase == DRAFT else
                                            layer_stats(h, x["counts"], x["pairs"], x["shared"])}
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: read_route_trace.py FILE", file=sys.stderr)
        return 2
    path = sys.argv[1]
    with open(path, "rb") as f:
        data = f.read()
    try:
        h, steps = read_trace(data)
    except Reject as e:
        print("%s: rejected: %s" % (path, e))
        return 1
    print(json.dumps(summary(h, steps), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
