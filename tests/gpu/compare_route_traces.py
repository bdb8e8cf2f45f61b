#!/usr/bin/env python3
"""Compares two route traces (formats/route-trace.md) as the independent reader of
tests/oracle/read_route_trace.py reads them: route_trace_device.sh's check that aff-run and
aff-serve record the same routing on the GPU as on the CPU path.

usage: compare_route_traces.py A B MAX_DIFFERING [AFF_TRACE]
The headers must be equal (geometry, identity, hash layers), and so must every step's tokens
(id, sequence, position, phase) and layer list. A token's selection in a layer is its K expert
ids in the router's order; MAX_DIFFERING is the largest fraction of selections that may differ
(the GPU's router scores differ from the CPU's in the last bits, so a near-tied choice may go
the other way, and its effect reach later tokens). Draft steps (the MTP layer's calls, layer L:
route-trace.md §5.1) are compared as every other step, and the line counts their selections
apart. Prints one line; exit status 1 if a check fails, 2 if a trace is rejected.
The reader decodes zstd chunks with the `zstd` command. Where there is none and AFF_TRACE (the
aff-trace binary) is given, only what `aff-trace summary --json` says of both is compared
(identity, geometry, steps, tokens, sequences and tokens per phase), and the line says
"structure only": the selections are then not compared.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
from read_route_trace import Reject, read_trace  # noqa: E402


def load(path):
    try:
        with open(path, "rb") as f:
            return read_trace(f.read())
    except Reject as e:
        print(f"{path}: rejected: {e}")
        sys.exit(2)


def structure(aff_trace, path):
    s = json.loads(subprocess.run([aff_trace, "summary", "--json", path], capture_output=True, check=True).stdout)
    keys = ("identity", "identity_kind", "layers", "experts", "top_k", "hash_layers", "steps", "token_steps", "sequences")
    return {k: s[k] for k in keys} | {p: v["tokens"] for p, v in s["phases"].items()}


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: compare_route_traces.py A B MAX_DIFFERING [AFF_TRACE]")
    if shutil.which("zstd") is None and len(sys.argv) == 5:
        a, b = structure(sys.argv[4], sys.argv[1]), structure(sys.argv[4], sys.argv[2])
        if a != b:
            print(f"FAIL summaries differ: {a} vs {b}")
            return 1
        print(f"ok structure only (no zstd command for the independent reader; selections not compared): "
              f"{a['steps']} steps, {a['token_steps']} tokens")
        return 0
    (ha, sa), (hb, sb) = load(sys.argv[1]), load(sys.argv[2])
    limit = float(sys.argv[3])
    if ha != hb:
        print(f"FAIL headers differ: {ha} vs {hb}")
        return 1
    if len(sa) != len(sb):
        print(f"FAIL {len(sa)} steps vs {len(sb)}")
        return 1
    k, selections, differing, tokens = ha["k"], 0, 0, 0
    drafts = draft_selections = draft_differing = 0  # the MTP layer's (layer L: draft steps)
    for i, ((ta, ba), (tb, bb)) in enumerate(zip(sa, sb)):
        if ta != tb:
            print(f"FAIL step {i}: tokens differ: {ta[:4]}... vs {tb[:4]}...")
            return 1
        if [layer for layer, _ in ba] != [layer for layer, _ in bb]:
            print(f"FAIL step {i}: layers differ")
            return 1
        tokens += len(ta)
        drafts += [layer for layer, _ in ba] == [ha["layers"]]
        for (layer, ia), (_, ib) in zip(ba, bb):
            for t in range(len(ta)):
                selections += 1
                differ = ia[t * k:(t + 1) * k] != ib[t * k:(t + 1) * k]
                differing += differ
                if layer == ha["layers"]:
                    draft_selections += 1
                    draft_differing += differ
    frac = differing / selections if selections else 1.0
    verdict = "ok" if selections and frac <= limit else "FAIL"
    draft_part = f"; {drafts} draft steps, {draft_selections} of the selections, {draft_differing} differ" if drafts else ""
    print(f"{verdict} {len(sa)} steps, {tokens} tokens, {selections} selections, {differing} differ "
          f"({100 * frac:.2f} %, at most {100 * limit:.2f} %){draft_part}")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
