# Replay of a small synthetic trace with every policy at two GPU sizes and a host pool:
# the table, the JSON's counters for one policy, and the SVG curve.
aff-trace synth --family v4flash --sequences 1 --decode-tokens 32 --out t.aft -q
aff-trace replay t.aft --gpu-mib 8192,32768 --host-mib 16384 --svg curve.svg
aff-trace replay t.aft --gpu-mib 8192 --policy belady --json | python3 -c '
import json, sys
r = json.load(sys.stdin)["results"][0]
print(r["policy"], r["gpu_slots"], r["accesses"], r["gpu_hits"] + r["host_hits"] + r["ssd_reads"])'
head -c 4 curve.svg; echo; grep -c "<polyline" curve.svg
