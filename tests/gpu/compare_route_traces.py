#!/usr/bin/env python3
"""Compares two route traces (formats/route-trace.md) as the independent reader of
tests/oracle/read_route_trace.py reads them: route_trace_device.sh's check that aff-run and
aff-serve record the same routing on the GPU as on the CPU path.

usage: compare_route_traces.py A B MAX_DIFFERING
The headers must be equal (geometry, identity, hash layers), and so must every step's tokens
(id, sequence, position, phase) and layer list. A token's selection in a layer is its K expert
ids in the router's order; MAX_DIFFERING is the largest fraction of selections that may differ
(the GPU's router scores differ from the CPU's in the last bits, so a near-tied choice may go
the other way, and its effect reach later tokens). Prints one line; exit status 1 if a check
fails, 2 if a trace is rejected.
"""
import os
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


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: compare_route_traces.py A B MAX_DIFFERING")
    (ha, sa), (hb, sb) = load(sys.argv[1]), load(sys.argv[2])
    limit = float(sys.argv[3])
    if ha != hb:
        print(f"FAIL headers differ: {ha} vs {hb}")
        return 1
    if len(sa) != len(sb):
        print(f"FAIL {len(sa)} steps vs {len(sb)}")
        return 1
    k, selections, differing, tokens = ha["k"], 0, 0, 0
    for i, ((ta, ba), (tb, bb)) in enumerate(zip(sa, sb)):
        if ta != tb:
            print(f"FAIL step {i}: tokens differ: {ta[:4]}... vs {tb[:4]}...")
            return 1
        if [layer for layer, _ in ba] != [layer for layer, _ in bb]:
            print(f"FAIL step {i}: layers differ")
            return 1
        tokens += len(ta)
        for (_, ia), (_, ib) in zip(ba, bb):
            for t in range(len(ta)):
                selections += 1
                differing += ia[t * k:(t + 1) * k] != ib[t * k:(t + 1) * k]
    frac = differing / selections if selections else 1.0
    verdict = "ok" if selections and frac <= limit else "FAIL"
    print(f"{verdict} {len(sa)} steps, {tokens} tokens, {selections} selections, {differing} differ "
          f"({100 * frac:.2f} %, at most {100 * limit:.2f} %)")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
