#!/usr/bin/env bash
# DSpark drafts on a GPU trunk (issue 18), with prebuilt portable binaries laid out as
# main_device_run.sh takes them (BIN/tests/aff_gpu_tests, BIN/tests/aff_make_dspark_model,
# BIN/tools/aff-run, BIN/tools/aff-quantize; tests/gpu/configure_portable.sh): first the device
# family `dspark` (tests/gpu/dspark_test.cpp: the trunk's taps against the CPU's, logits with
# taps on and off bit for bit, the stages' rings and block, greedy identity with drafts); then
# end to end through aff-run on the GPU, on the random checkpoint with DSpark stages
# (aff_make_dspark_model) and on its aff-quantize'd main container with the draft container
# beside it: the greedy tokens with --draft dspark --draft-max 1..5 must be those of
# --draft off, stderr naming the drafter and closing with its acceptance line; --draft auto
# picks the gated DSpark drafter with the same tokens; --draft-placement ram with --draft
# dspark is refused, exit 1, one line. The prompt is 4 tokens: shorter than the prefill GEMMs'
# 5, so the runs without drafts take the GEMVs (fp32 activations) that calls with drafts take
# (gpu_sequence.hpp), and the two differ only in fp32 summation order. Writes the logs and a
# summary into OUT; exits 1 if a check failed. Aimed at under 120 s on an H200.
# usage: tests/gpu/dspark_gpu_device.sh BIN OUT
set -uo pipefail
bin=$(cd "${1:?usage: dspark_gpu_device.sh BIN OUT}" && pwd) || exit 2
out=${2:?usage: dspark_gpu_device.sh BIN OUT}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
repo=$(cd "$(dirname "$0")/../.." && pwd)
export AFF_TEST_DATA=$repo/tests/data
rc=0
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

start=$SECONDS
if timeout 150 "$bin/tests/aff_gpu_tests" dspark >"$out/dspark.txt" 2>&1; then t=ok; else t="FAILED ($?)"; rc=1; fi
note "aff_gpu_tests dspark: $t in $((SECONDS - start)) s; $(tail -1 "$out/dspark.txt")"
grep 'FAIL$' "$out/dspark.txt" | head -30 >>"$summary"
grep -A40 'crashed with' "$out/dspark.txt" >>"$summary"
grep '^dspark ' "$out/dspark.txt" | head -80 >>"$summary"

model=$out/dspark-v4
if ! "$bin/tests/aff_make_dspark_model" "$model"; then
  note "FAIL aff_make_dspark_model"
  exit 1
fi
ids() { sed -n 's/^generated tokens://p' "$1"; }
run() {  # name, flags...
  local name=$1
  shift
  timeout 60 "$bin/tools/aff-run" --tokens 0,5,9,300 -n 40 --temp 0 --ignore-eos --no-echo --ui plain --dump-tokens \
    "$@" >"$out/$name.txt" 2>"$out/$name.err"
}
on() {  # label, main model flags...
  local label=$1
  shift
  if ! run "$label-off" "$@" --draft off; then
    note "FAIL aff-run GPU $label --draft off: $(tail -1 "$out/$label-off.err")"
    rc=1
    return
  fi
  grep -q '^aff-run: drafts off' "$out/$label-off.err" || { note "FAIL $label: no 'drafts off' line"; rc=1; }
  local want
  want=$(ids "$out/$label-off.err")
  [ -n "$want" ] || { note "FAIL $label: no generated tokens"; rc=1; return; }
  for k in 1 2 3 4 5; do
    if ! run "$label-$k" "$@" --draft dspark --draft-max $k; then
      note "FAIL aff-run GPU $label --draft dspark --draft-max $k: $(tail -1 "$out/$label-$k.err")"
      rc=1
      continue
    fi
    verdict=ok
    [ "$(ids "$out/$label-$k.err")" = "$want" ] || verdict="FAIL tokens differ from --draft off"
    grep -qx "aff-run: drafts: dspark, up to $k a step" "$out/$label-$k.err" || verdict="FAIL no drafter line"
    line=$(grep '^aff-run: drafts: [0-9]* verify calls' "$out/$label-$k.err")
    [ -n "$line" ] || verdict="FAIL no acceptance line"
    [ "$verdict" = ok ] || rc=1
    note "aff-run GPU $label --draft dspark --draft-max $k: $verdict; ${line#aff-run: }"
  done
  if run "$label-auto" "$@"; then
    grep -qx 'aff-run: drafts: dspark, up to 3 a step, while faster than without' "$out/$label-auto.err" &&
      [ "$(ids "$out/$label-auto.err")" = "$want" ] && note "aff-run GPU $label --draft auto: gated DSpark drafter, same tokens" ||
      { note "FAIL aff-run GPU $label --draft auto: $(grep 'drafts' "$out/$label-auto.err" | head -2 | tr '\n' ' ')"; rc=1; }
  else
    note "FAIL aff-run GPU $label --draft auto: $(tail -1 "$out/$label-auto.err")"
    rc=1
  fi
}
on checkpoint -m "$model"
if "$bin/tools/aff-quantize" --src "$model" --out "$out/m.aff" --progress never 2>"$out/quantize.err" &&
  "$bin/tools/aff-quantize" --dspark --codebook "$out/m.aff" --src "$model" --out "$out/m.dspark.aff" --progress never \
    2>>"$out/quantize.err"; then
  on container -m "$out/m.aff"
else
  note "FAIL aff-quantize: $(tail -1 "$out/quantize.err")"
  rc=1
fi

# --draft-placement with DSpark on the GPU: refused, exit 1, one line (the stages run on the CPU).
timeout 60 "$bin/tools/aff-run" -m "$model" --tokens 0,5,9 -n 4 --temp 0 --draft dspark --draft-placement ram \
  >"$out/placed.txt" 2>"$out/placed.err"
status=$?
if [ $status = 1 ] && [ "$(grep -c . "$out/placed.err")" = 1 ] &&
  grep -q -- '^aff-run: --draft dspark: --draft-placement places the MTP layer' "$out/placed.err"; then
  note "aff-run GPU --draft dspark --draft-placement ram: refused (exit 1): $(cat "$out/placed.err")"
else
  note "FAIL aff-run GPU --draft dspark --draft-placement ram: exit $status: $(head -3 "$out/placed.err" | tr '\n' ' ')"
  rc=1
fi
rm -rf "$model" "$out/m.aff" "$out/m.dspark.aff"
for f in "$out"/*.err; do  # a crashed aff-run's stack, for addr2line on the unstripped build
  [ -f "$f" ] && grep -q 'crashed with' "$f" && { echo "== $(basename "$f")"; grep -A40 'crashed with' "$f"; } >>"$summary"
done
[ $rc = 0 ] && note "dspark_gpu_device.sh: all passed" || note "dspark_gpu_device.sh: FAILURES"
exit $rc
