# --json carries the per-layer figures and the top list; python3 reads it as a client.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf m.imatrix.gguf
aff-profile --imatrix m.imatrix.gguf --top 1 --json -q | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["layers"], j["experts"], j["source"], j["activations"])
for l in j["per_layer"]: print(l["layer"], l["activations"], l["used"], l["experts_for_50"], l["experts_for_80"])
for t in j["top"]: print(t["layer"], t["expert"], t["activations"], t["share"])'
