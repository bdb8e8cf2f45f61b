# The independent reader tests/oracle/read_route_trace.py (written from
# formats/route-trace.md alone) and aff-trace must agree on traces written by libaff: every
# count the oracle prints (geometry, identity, steps, tokens, per layer and per phase the
# selections, experts used, busiest expert, 90/99 % coverage, consecutive-token pairs and
# shared experts) equals aff-trace summary --json's. Both codecs: zstd chunks are decoded
# by the oracle through the zstd command, so that case runs only where it is installed. A
# damaged trace is refused by both. Where zstd is installed, the traces aff-run recorded on
# the trained tiny model are compared too: tiny-trained.trace, and tiny-trained-drafts.trace
# with every phase of formats/route-trace.md 5.1 (recorded by aff-run -m
# tests/data/models/tiny-trained -p 'def fibonacci(n):' -n 40 --temp 0 --gpus 0 --draft mtp
# --draft-max 3 --route-trace FILE; it also seeds the fuzz target's corpus).
if ! command -v python3 >/dev/null; then
  echo "skipped: python3 is not installed, so the independent reader was not run"
  exit 0
fi
oracle="$SRC/tests/oracle/read_route_trace.py"
compare='
import json, sys
o, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
def check(x, y, where):
    if isinstance(x, dict):
        for k in x:
            if k not in y: sys.exit("DISAGREE %s: aff-trace has no %s" % (where, k))
            check(x[k], y[k], where + "." + k)
    elif isinstance(x, list):
        if len(x) != len(y): sys.exit("DISAGREE %s: lengths %d and %d" % (where, len(x), len(y)))
        for i, (p, q) in enumerate(zip(x, y)): check(p, q, "%s[%d]" % (where, i))
    elif x != y:
        sys.exit("DISAGREE %s: oracle %r, aff-trace %r" % (where, x, y))
check(o, a, "summary")
print("agreed: %d steps, %d tokens, %d layers, phases %s" % (o["steps"], o["token_steps"], o["layers"], ",".join(sorted(o["phases"]))))'
codecs="none"
command -v zstd >/dev/null && codecs="none zstd"
for c in $codecs; do
  aff-trace synth --family v4flash --sequences 2 --decode-tokens 24 --seed 5 --compression $c --out t.aft -q
  python3 "$oracle" t.aft > o.json
  aff-trace summary --json t.aft > a.json
  python3 -c "$compare" o.json a.json
done
# The trace aff-run recorded on the embedded default model (tests/data/traces; zstd chunks).
if command -v zstd >/dev/null; then
  for t in tiny-trained tiny-trained-drafts; do
    python3 "$oracle" "$DATA/traces/$t.trace" > o.json
    aff-trace summary --json "$DATA/traces/$t.trace" > a.json
    python3 -c "$compare" o.json a.json
  done
fi
aff-trace synth --family tiny --compression none --out d.aft -q
printf '\x09' | dd of=d.aft bs=1 seek=200 conv=notrunc status=none
python3 "$oracle" d.aft | sed 's/: rejected: .*/: rejected/'
aff-trace summary d.aft 2>/dev/null || echo "aff-trace refused d.aft"
