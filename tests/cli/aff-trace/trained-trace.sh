# Replay of the route trace aff-run recorded on the embedded default model (tests/data/traces:
# 4 layers x 16 experts, 1284 prompt and 256 sampled tokens) at 8, 16, 32 and 48 GPU slots with
# the rest in the host pool: every policy's GPU hits, pinned, and none above Belady's.
aff-trace replay "$DATA/traces/tiny-trained.trace" --gpu-mib 0.36,0.72,1.44,2.16 --host-mib 4 --json | python3 -c '
import json, sys
rows = json.load(sys.stdin)["results"]
for r in rows:
    print(r["gpu_slots"], r["policy"], r["accesses"], r["gpu_hits"], r["pcie_bytes"])
best = {r["gpu_slots"]: r["gpu_hits"] for r in rows if r["policy"] == "belady"}
assert all(r["gpu_hits"] <= best[r["gpu_slots"]] for r in rows), "a policy beat Belady"
print("belady is the bound at every size")'
