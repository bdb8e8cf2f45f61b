# --route-trace with DSpark drafts on the CPU path (formats/route-trace.md §5.1), on the random
# checkpoint with mtp.0..2 DSpark stages (6 main layers): the greedy output is the output without
# drafts; aff-trace summary has prefill, draft-verify and draft tokens (each block's γ = 5 rows,
# the stages as layers 6-8, without per-layer figures), 5 draft tokens per verify call of the
# acceptance line (one block a proposal, always 5 rows whatever the draft length), and the
# per-layer table has the 6 main layers only; the independent reader agrees where it can run.
model="$AFF_DSPARK_MODEL_DIR"
tokens=0,5,9,300,17,33,2,800,45,61,7,12,90,111,3,4,5,6,700,21
run() { aff-run -m "$model" --tokens $tokens -n 16 --temp 0 --gpus 0 --ignore-eos --dump-tokens "$@"; }
ids() { sed -n 's/^generated tokens://p' "$1"; }
run --draft off >/dev/null 2>plain.err
run --draft dspark --draft-max 3 --route-trace d.aft >/dev/null 2>drafted.err
[ -n "$(ids plain.err)" ]
[ "$(ids plain.err)" = "$(ids drafted.err)" ]
calls=$(sed -n 's/^aff-run: drafts: \([0-9]*\) verify calls.*/\1/p' drafted.err)
[ "$calls" -gt 0 ]
aff-trace summary d.aft | grep -Eq '^phase draft: [0-9]+ tokens \(layers 6-8, the DSpark stages: not in the table below\)$'
aff-trace summary --json d.aft >s.json
python3 - "$calls" s.json <<'PY'
import json, sys
calls, s = int(sys.argv[1]), json.load(open(sys.argv[2]))
ph = {p: x["tokens"] for p, x in s["phases"].items()}
assert {"prefill", "draft-verify", "draft"} <= set(ph) <= {"prefill", "decode", "draft-verify", "replay", "draft"}, ph
assert s["phases"]["draft"]["per_layer"] == [], s["phases"]["draft"]
assert ph["draft"] == 5 * calls, (ph, calls)
assert 2 * calls <= ph["draft-verify"] <= 4 * calls, (ph, calls)
assert s["token_steps"] == sum(ph.values()), s["token_steps"]
assert s["layers"] == 6 and len(s["phases"]["prefill"]["per_layer"]) == 6, s["layers"]
PY
# The independent reader (it needs the zstd command for aff-run's zstd chunks) reads the same.
if command -v zstd >/dev/null; then
  python3 "$SRC/tests/oracle/read_route_trace.py" d.aft >o.json
  python3 -c 'import json, sys
o, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for key in ("steps", "token_steps", "sequences"): assert o[key] == a[key], key
assert {p: x["tokens"] for p, x in o["phases"].items()} == {p: x["tokens"] for p, x in a["phases"].items()}' o.json s.json
fi
