# --route-trace with MTP drafts on the CPU path (formats/route-trace.md §5.1), on the trained
# tiny model at draft lengths 1 and 3: the greedy output is the output without drafts and
# without a trace; aff-trace summary has prefill, draft-verify, replay and draft (the MTP
# layer's calls, without per-layer figures) tokens (and perhaps decode), as many in all as its
# token_steps, and 2 to k+1 draft-verify tokens per verify call of the acceptance line. Where the zstd command is installed (the independent reader needs it
# for aff-run's zstd chunks), the reader's per-phase counts equal aff-trace's, and
# tests/oracle/check_draft_trace.py checks every step against the acceptance line (verify
# steps = verify calls, a replay after exactly the partly kept ones, k draft steps of layer L
# before each verify step, required with --expect-drafts, each ending with the verify step's
# token one position before it, the kept guesses averaging the line's mean).
model="$DATA/models/tiny-trained"
aff-run -m "$model" -p 'def fibonacci(n):' -n 40 --temp 0 --gpus 0 --draft off --no-echo >plain.txt 2>/dev/null
for k in 1 3; do
  aff-run -m "$model" -p 'def fibonacci(n):' -n 40 --temp 0 --gpus 0 --draft mtp --draft-max $k --no-echo \
    --route-trace d$k.aft >drafted.txt 2>drafted.err
  cmp plain.txt drafted.txt
  line=$(grep '^aff-run: drafts: [0-9]* verify calls' drafted.err)
  aff-trace summary --json d$k.aft >s.json
  aff-trace summary d$k.aft | grep -Eq '^phase draft: [0-9]+ tokens \(layer 4, the MTP layer: not in the table below\)$'
  python3 - "$k" "$line" s.json <<'PY'
import json, sys
k, calls, s = int(sys.argv[1]), int(sys.argv[2].split()[2]), json.load(open(sys.argv[3]))
ph = {p: x["tokens"] for p, x in s["phases"].items()}
assert calls > 0, sys.argv[2]
assert {"prefill", "draft-verify", "replay", "draft"} <= set(ph) <= {"prefill", "decode", "draft-verify", "replay", "draft"}, ph
assert s["phases"]["draft"]["per_layer"] == [], s["phases"]["draft"]
assert 2 * calls <= ph["draft-verify"] <= (k + 1) * calls, (ph, calls)
assert s["token_steps"] == sum(ph.values()), s["token_steps"]
PY
  if command -v zstd >/dev/null; then
    python3 "$SRC/tests/oracle/read_route_trace.py" d$k.aft >o.json
    python3 -c 'import json, sys
o, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for key in ("steps", "token_steps", "sequences"): assert o[key] == a[key], key
assert {p: x["tokens"] for p, x in o["phases"].items()} == {p: x["tokens"] for p, x in a["phases"].items()}' o.json s.json
    python3 "$SRC/tests/oracle/check_draft_trace.py" --expect-drafts d$k.aft $k "$line"
  fi
done
