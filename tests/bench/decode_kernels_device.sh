#!/usr/bin/env bash
# Where a resident decode step's time goes, kernel by kernel (issue 17: the tiers run at their
# floor, the resident decode at 3-4 x its own, and the next step is to know whether that is
# slow kernels or the gaps between them). On a real-geometry container (make_geometry_container
# --layers 4): decode_bench's graph-replay step time and op classes, then Nsight Compute's
# duration of every kernel of aff-run's decode calls (`--metrics gpu__time_duration.sum`,
# clocks left alone) for two generation lengths, so that the difference is exactly the extra
# decode steps: per step, each kernel's launches and time, their sum, and the sum against the
# graph replay's step (the rest is launch gaps and latency between kernels, which fusion or
# fewer launches would remove, and no kernel tuning would).
# usage: tests/bench/decode_kernels_device.sh BIN OUT   (BIN: a portable build laid out as
#        BIN/tests/{make_geometry_container,decode_bench} and BIN/tools/aff-run)
set -uo pipefail
bin=$(cd "${1:?usage: decode_kernels_device.sh BIN OUT}" && pwd) || exit 2
out=${2:?usage: decode_kernels_device.sh BIN OUT}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
work=${WORK:-/tmp/aff-decode-kernels}
mkdir -p "$work"
g=$work/g4.aff
[ -f "$g" ] || "$bin/tests/make_geometry_container" "$g" --layers 4 >"$out/make.txt" 2>&1 || {
  echo "FAIL make_geometry_container: $(tail -2 "$out/make.txt")"
  exit 1
}
timeout 240 "$bin/tests/decode_bench" "$g" 16 >"$out/decode_bench.txt" 2>&1 || echo "FAIL decode_bench ($?)"
grep -E 'layers|batch|step|class|ms' "$out/decode_bench.txt" | head -60

ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine"; exit 1; }
short=2
long=6
for n in $short $long; do
  timeout 200 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    "$bin/tools/aff-run" -m "$g" --tokens 7 -n $n --temp 0 --ignore-eos --no-echo --ui plain \
    >"$out/ncu-$n.csv" 2>"$out/ncu-$n.err" || echo "ncu run n=$n exit $? ($(tail -1 "$out/ncu-$n.err"))"
done
python3 - "$out/ncu-$short.csv" "$out/ncu-$long.csv" $((long - short)) "$out/decode_bench.txt" <<'EOF'
import csv, re, sys
from collections import defaultdict

def kernels(path):
    rows = []
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        rows.append((r["Kernel Name"].split("(")[0].split("<")[0], float(r["Metric Value"].replace(",", "")) / 1e3))  # ns -> us
    return rows

a, b = kernels(sys.argv[1]), kernels(sys.argv[2])
steps = int(sys.argv[3])
def agg(rows):
    d = defaultdict(lambda: [0, 0.0])
    for name, us in rows:
        d[name][0] += 1
        d[name][1] += us
    return d
da, db = agg(a), agg(b)
per = {}
for name in set(da) | set(db):
    n = (db[name][0] - da[name][0]) / steps
    t = (db[name][1] - da[name][1]) / steps
    if n > 0:
        per[name] = (n, t)
total_n = sum(v[0] for v in per.values())
total_t = sum(v[1] for v in per.values())
print(f"kernels a decode step (4 layers + head): {total_n:.1f} launches, {total_t:.1f} us of kernel time "
      f"(runs: {len(a)} and {len(b)} kernels, {steps} steps apart)")
for name, (n, t) in sorted(per.items(), key=lambda kv: -kv[1][1]):
    print(f"  {name:48s} {n:6.1f} a step  {t:9.1f} us  ({t / n:7.2f} us each, {100 * t / total_t:5.1f} %)")
graph, batch = None, None
for line in open(sys.argv[4]):
    m = re.match(r"batch (\d+) \(position", line)
    if m:
        batch = int(m.group(1))
    m = re.match(r"4\s+\S+\s+([0-9.]+)", line)
    if m and batch == 1 and graph is None:
        graph = float(m.group(1))
print(f"graph replay step (decode_bench, 4 layers, batch 1): {graph if graph else 'see decode_bench.txt'} ms; "
      f"kernel time {total_t / 1e3:.3f} ms")
EOF
