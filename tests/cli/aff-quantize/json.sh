# --json: one object on stdout with the run's counts and sizes (tiny-b: 3 layers x 6
# experts; rows of 64 and 32 inputs take a whole 256-weight block each).
aff-quantize --src "$DATA/models/tiny-b" --out m.aff --json -q > report.json
python3 - <<'PY'
import json, os
r = json.load(open("report.json"))
assert r["bytes"] == os.path.getsize("m.aff"), r["bytes"]
assert 0 < r["nmse"] <= r["worst_nmse"] < 0.06, (r["nmse"], r["worst_nmse"])
for k in ("out", "experts", "matrices", "expert_weights", "expert_bytes", "bits_per_weight", "dense_tensors"):
    print(k, r[k])
PY
