#!/usr/bin/env bash
# Does drawing the live view cost decode time? (issue 19) The same greedy CPU run of the
# tiny fixture with --ui plain (stderr to a file) and with --ui dash (the dashboard in an
# 80x24 tmux pane, redrawn 5 times a second), both inside tmux, alternating, RUNS times
# each. Prints each mode's decode tok/s (mean and spread over the runs, from aff-run's
# closing line) and the dash/plain ratio next to its bound: the ratio is within the
# plain runs' own run-to-run spread (no measurable cost).
# usage: tests/bench/ui_cost_bench.sh [BUILD_DIR=build] [RUNS=7] [TOKENS=3000] [THREADS=1]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "${1:-build}" && pwd)
runs=${2:-7} tokens=${3:-3000} threads=${4:-1}
model=$PWD/tests/data/models/tiny-a
work=$(mktemp -d)
sock=$work/tmux.sock
trap 'tmux -S "$sock" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
tmx() { tmux -S "$sock" -f /dev/null "$@"; }
run_args="-m $model --tokens 0,5,9,33 -n $tokens --ignore-eos --temp 0 -t $threads --no-echo"

# One run in a fresh 80x24 pane; prints the decode tok/s of aff-run's closing line.
one() {
  local mode=$1 n=$2 err=$work/$1-$2.err
  local redirect="2>'$err'"
  [ "$mode" = dash ] && redirect=""  # the dashboard needs stderr on the pane
  tmx new-session -d -s "r$n$mode" -x 80 -y 24 \
    "LANG=C.UTF-8 $build/tools/aff-run $run_args --ui $mode >/dev/null $redirect; echo done >'$work/$mode-$n.done'"
  tmx set-option -t "r$n$mode" remain-on-exit on >/dev/null
  for _ in $(seq 1200); do [ -e "$work/$mode-$n.done" ] && break; sleep 0.1; done
  [ "$mode" = dash ] && tmx capture-pane -p -S - -t "r$n$mode" > "$err"
  tmx kill-session -t "r$n$mode"
  sed -n 's/^aff-run: prefill .* decode [0-9]* tokens \([0-9.]*\) tok\/s.*/\1/p' "$err" | tail -1
}

plain=() dash=()
for i in $(seq "$runs"); do
  plain+=("$(one plain "$i")")
  dash+=("$(one dash "$i")")
done
printf '%s\n' "${plain[@]}" > "$work/plain"
printf '%s\n' "${dash[@]}" > "$work/dash"
stats() { awk '{ s += $1; q += $1 * $1; n++; if (min == "" || $1 < min) min = $1; if ($1 > max) max = $1 }
  END { m = s / n; v = q / n - m * m; sd = sqrt(v > 0 ? v : 0); printf "%.1f %.1f %.1f %.1f\n", m, sd, min, max }' "$1"; }
read -r pm psd pmin pmax < <(stats "$work/plain")
read -r dm dsd dmin dmax < <(stats "$work/dash")
echo "ui_cost_bench: $(nproc) cores, tiny-a, $tokens tokens, $threads thread(s), $runs runs each, alternating"
echo "ui_cost_bench: plain decode ${plain[*]} tok/s"
echo "ui_cost_bench: dash  decode ${dash[*]} tok/s"
awk -v pm="$pm" -v psd="$psd" -v dm="$dm" -v dsd="$dsd" -v pmin="$pmin" -v pmax="$pmax" -v dmin="$dmin" -v dmax="$dmax" 'BEGIN {
  r = dm / pm; spread = psd / pm
  printf "ui_cost_bench: plain %.1f +- %.1f tok/s (%.1f-%.1f), dash %.1f +- %.1f tok/s (%.1f-%.1f)\n", pm, psd, pmin, pmax, dm, dsd, dmin, dmax
  printf "ui_cost_bench: dash/plain %.4f; bound: within 1 +- %.4f (2 x the plain runs relative spread): %s\n", r, 2 * spread,
         (r >= 1 - 2 * spread ? "no measurable cost" : "SLOWER than the spread") }'
