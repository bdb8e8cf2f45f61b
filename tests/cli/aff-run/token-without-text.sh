# Ids the model has but the tokenizer lacks (DeepSeek: 128815-129279): one forced (or
# sampled) prints nothing and the run goes on (it used to abort mid-output). Here id 255
# lacks text.
. "$SRC/tests/cli/aff-serve/server.bash"  # byte_tokenizer: one token per byte
byte_tokenizer tok.json
# The byte that had id 255 gets id 256 instead: the model's id 255 has no text.
python3 - <<'PY'
import json
t = json.load(open("tok.json"))
v = t["model"]["vocab"]
v[next(k for k, i in v.items() if i == 255)] = 256
json.dump(t, open("tok.json", "w"))
PY
aff-run -m "$DATA/models/tiny-a" --tokenizer tok.json --tokens 0,5 --force-tokens 72,255,105 --no-echo 2>err
grep -q '^aff-run: prefill 2 tokens' err
