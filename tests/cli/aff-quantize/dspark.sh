# The main container of tiny-a-fp8 (FP4 experts, FP8 dense) and its draft: the draft
# holds only the mtp.0 stage, records the main container's codebook id and carries no
# codebook; --imatrix is ignored there with a note. Both pass aff-verify.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf im.gguf 6 8 128 32
aff-quantize --src "$DATA/models/tiny-a-fp8" --imatrix im.gguf --out m.aff --progress never
aff-quantize --dspark --codebook m.aff --imatrix im.gguf --src "$DATA/models/tiny-a-fp8" --out m.dspark.aff \
  --progress never
aff-verify m.aff --progress never
aff-verify m.dspark.aff --progress never
aff-info --json m.aff > main.json
aff-info --json m.dspark.aff > draft.json
python3 - <<'PY'
import json
m, d = json.load(open("main.json")), json.load(open("draft.json"))
assert m["role"] == "main" and d["role"] == "draft", (m["role"], d["role"])
assert d["codebook"]["id"] == m["codebook"]["id"] and not d["codebook"]["embedded"]
assert d["config"] == m["config"]
print("main:", m["expert_extents"], m["bytes"], "profile", m["profile"]["size"], "imatrix",
      m["provenance"]["imatrix"]["file"])
print("draft:", d["expert_extents"], d["bytes"], "imatrix", d["provenance"]["imatrix"])
PY
