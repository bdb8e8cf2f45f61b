#!/usr/bin/env bash
# Does drawing the live view cost decode time? (issue 19) The same greedy CPU run of the
# tiny fixture with --ui plain (stderr to a file) and with --ui dash (the dashboard in an
# 80x24 tmux pane, redrawn 5 times a second, with the router's heat), both inside tmux,
# alternating, RUNS pairs. Prints each mode's decode tok/s from aff-run's closing line, the
# mean of the per-pair dash/plain ratios with its 2-standard-error interval (the bound: 1
# inside it means no measurable cost at this noise), and the CPU seconds each run used
# (/usr/bin/time: the view thread's own cost, ncurses output included, is the difference).
# usage: tests/bench/ui_cost_bench.sh [BUILD_DIR=build] [RUNS=9] [TOKENS=3000] [THREADS=1]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "${1:-build}" && pwd)
runs=${2:-9} tokens=${3:-3000} threads=${4:-1}
model=$PWD/tests/data/models/tiny-a
work=$(mktemp -d)
sock=$work/tmux.sock
trap 'tmux -S "$sock" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
tmx() { tmux -S "$sock" -f /dev/null "$@"; }
run_args="-m $model --tokens 0,5,9,33 -n $tokens --ignore-eos --temp 0 -t $threads --no-echo"

# One run in a fresh 80x24 pane; prints "tok/s cpu_seconds" (decode rate from aff-run's
# closing line, user + system seconds of the whole process).
one() {
  local mode=$1 n=$2 err=$work/$1-$2.err
  local redirect="2>'$err'"
  [ "$mode" = dash ] && redirect=""  # the dashboard needs stderr on the pane
  tmx new-session -d -s "r$n$mode" -x 80 -y 24 \
    "LANG=C.UTF-8 /usr/bin/time -f '%U %S' -o '$work/$mode-$n.time' $build/tools/aff-run $run_args --ui $mode >/dev/null $redirect; echo done >'$work/$mode-$n.done'"
  tmx set-option -t "r$n$mode" remain-on-exit on >/dev/null
  for _ in $(seq 1200); do [ -e "$work/$mode-$n.done" ] && break; sleep 0.1; done
  [ "$mode" = dash ] && tmx capture-pane -p -S - -t "r$n$mode" > "$err"
  tmx kill-session -t "r$n$mode"
  local rate cpu
  rate=$(sed -n 's/^aff-run: prefill .* decode [0-9]* tokens \([0-9.]*\) tok\/s.*/\1/p' "$err" | tail -1)
  cpu=$(awk '{ print $1 + $2 }' "$work/$mode-$n.time")
  [ -n "$rate" ] && [ -n "$cpu" ] || { echo "ui_cost_bench: the $mode run $n gave no figures:" >&2; cat "$err" >&2; exit 1; }
  echo "$rate $cpu"
}

: > "$work/pairs"
for i in $(seq "$runs"); do
  p=$(one plain "$i")
  d=$(one dash "$i")
  echo "$p $d" >> "$work/pairs"
done
echo "ui_cost_bench: $(nproc) cores, tiny-a, $tokens tokens, $threads thread(s), $runs pairs (plain then dash)"
awk '{ printf "ui_cost_bench: pair %d: plain %.1f tok/s %.2f s CPU, dash %.1f tok/s %.2f s CPU, ratio %.3f\n", NR, $1, $2, $3, $4, $3 / $1 }' "$work/pairs"
awk '{ r = $3 / $1; s += r; q += r * r; pc += $2; dc += $4; pr += $1; dr += $3; n++ }
  END {
    m = s / n; v = n > 1 ? (q - n * m * m) / (n - 1) : 0; se = sqrt(v > 0 ? v : 0) / sqrt(n)
    printf "ui_cost_bench: mean decode plain %.1f tok/s, dash %.1f tok/s; CPU a run plain %.2f s, dash %.2f s (%+.2f s)\n", pr / n, dr / n, pc / n, dc / n, (dc - pc) / n
    printf "ui_cost_bench: dash/plain %.3f, 2 SE [%.3f, %.3f]; bound: 1 inside it (no measurable cost): %s\n", m, m - 2 * se, m + 2 * se,
           (m - 2 * se <= 1 && 1 <= m + 2 * se) ? "yes" : (m < 1 ? "NO, dash slower" : "no, dash faster") }' "$work/pairs"
