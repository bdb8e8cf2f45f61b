#!/usr/bin/env bash
# DSpark drafts on a GPU trunk with the stages on the device (issue 18), with prebuilt portable
# binaries laid out as main_device_run.sh takes them (BIN/tests/aff_gpu_tests,
# BIN/tests/aff_make_dspark_model, BIN/tools/aff-run, BIN/tools/aff-quantize;
# tests/gpu/configure_portable.sh): first the device families `dspark` (tests/gpu/dspark_test.cpp:
# the trunk's taps against the CPU's, logits with taps on and off bit for bit, the device and
# host stages' rings and block against the CPU's on the same taps, greedy identity with drafts,
# the greedy chain on the device against host picks (ids, confidences, proposals, rings),
# a codebook-stored DSpark model tiered with the stages' experts in RAM and VRAM) and
# `attention` (the kernel's block mode against attend_block among the rest); then end to end
# through aff-run on the GPU, on the random checkpoint with DSpark stages
# (aff_make_dspark_model) and on its aff-quantize'd main container with the draft container
# beside it: the greedy tokens with --draft dspark --draft-max 1..5 must be those of --draft
# off, stderr naming the drafter with its stages on the GPU and closing with its acceptance
# line; --draft auto picks the gated DSpark drafter with the same tokens; --draft-placement vram
# with --draft dspark gives the same tokens, the start-up line naming the stages on the GPU;
# ram is refused there (this geometry's experts are dense stacks on the GPU; the dspark
# family's wide container runs ram and vram on a tiered trunk). The prompt is 4
# tokens: shorter than the prefill GEMMs' 5, so the runs without drafts take the GEMVs (fp32
# activations) that calls with drafts take (gpu_sequence.hpp), and the two differ only in fp32
# summation order. Writes the logs and a summary into OUT (the summary's lines on stdout too);
# exits 1 if a check failed. Aimed at under 180 s on an H200.
# usage: tests/gpu/dspark_gpu_device.sh BIN OUT
set -uo pipefail
source "$(dirname "$0")/device_script.bash" "$@"

for family in dspark attention; do
  gpu_family 240 $family  # its line and failed rows into the summary
  grep 'FAIL$' "$out/$family.txt" | head -30  # the failed rows on stdout too
  grep -A40 'crashed with' "$out/$family.txt" | tee -a "$summary"
done
grep '^dspark ' "$out/dspark.txt" | head -120 >>"$summary"
# The measured stage differences (the tolerances' evidence) and the runners' lines, on stdout.
grep '^dspark ' "$out/dspark.txt" | grep -E 'device stages: (stage|block guess [04]: M)|runner says|start-up line|tiered|refused|host stages, k=3: greedy' | head -30
grep -E '^dspark +device chain' "$out/dspark.txt" | grep -E 'prompt 0|proposals' | head -12
grep '^attention .* block .*nmse vs attend_block' "$out/attention.txt" | grep -E 'flash|ring_first 295' | head -8

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
    grep -q "^aff-run: drafts: dspark, up to $k a step, stages on the GPU, their routed experts in VRAM$" "$out/$label-$k.err" ||
      verdict="FAIL no drafter line naming the stages on the GPU: $(grep '^aff-run: drafts: dspark' "$out/$label-$k.err")"
    line=$(grep '^aff-run: drafts: [0-9]* verify calls' "$out/$label-$k.err")
    [ -n "$line" ] || verdict="FAIL no acceptance line"
    [ "$verdict" = ok ] || rc=1
    note "aff-run GPU $label --draft dspark --draft-max $k: $verdict; ${line#aff-run: }"
  done
  if run "$label-auto" "$@"; then
    grep -qx 'aff-run: drafts: dspark, up to 3 a step, stages on the GPU, their routed experts in VRAM, while faster than without' "$out/$label-auto.err" &&
      [ "$(ids "$out/$label-auto.err")" = "$want" ] && note "aff-run GPU $label --draft auto: gated DSpark drafter, same tokens" ||
      { note "FAIL aff-run GPU $label --draft auto: $(grep 'drafts' "$out/$label-auto.err" | head -2 | tr '\n' ' ')"; rc=1; }
  else
    note "FAIL aff-run GPU $label --draft auto: $(tail -1 "$out/$label-auto.err")"
    rc=1
  fi
  # --draft-placement vram with the stages on the device: accepted, the same tokens, the lines
  # saying where. ram: this tiny geometry's experts are dense stacks on the GPU (moe_gemv takes
  # D = 256 nowhere), which have no extents to put in host memory: refused, exit 1, one line
  # (the dspark family's wide container checks ram).
  if run "$label-placed-vram" "$@" --draft dspark --draft-max 3 --draft-placement vram; then
    verdict=ok
    [ "$(ids "$out/$label-placed-vram.err")" = "$want" ] || verdict="FAIL tokens differ from --draft off"
    grep -q "^aff-run: drafts: dspark, up to 3 a step, stages on the GPU, their routed experts in VRAM$" \
      "$out/$label-placed-vram.err" || verdict="FAIL the drafter line does not say VRAM: $(grep '^aff-run: drafts: dspark' "$out/$label-placed-vram.err")"
    grep -q "DSpark stages on the GPU" "$out/$label-placed-vram.err" || verdict="FAIL the start-up line does not name the stages on the GPU"
    [ "$verdict" = ok ] || rc=1
    note "aff-run GPU $label --draft dspark --draft-placement vram: $verdict"
  else
    note "FAIL aff-run GPU $label --draft-placement vram: exit $?: $(head -3 "$out/$label-placed-vram.err" | tr '\n' ' ')"
    rc=1
  fi
  run "$label-placed-ram" "$@" --draft dspark --draft-max 3 --draft-placement ram
  local status=$?
  if [ $status = 1 ] && [ "$(grep -c . "$out/$label-placed-ram.err")" = 1 ] &&
    grep -q 'not codebook-stored' "$out/$label-placed-ram.err"; then
    note "aff-run GPU $label --draft dspark --draft-placement ram: refused for dense experts (exit 1): $(cat "$out/$label-placed-ram.err")"
  else
    note "FAIL aff-run GPU $label --draft-placement ram: exit $status: $(head -3 "$out/$label-placed-ram.err" | tr '\n' ' ')"
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

# Where the stages ran, from the k=1 runs' drafter lines.
for label in checkpoint container; do
  [ -f "$out/$label-1.err" ] && note "$label: $(grep '^aff-run: drafts: dspark' "$out/$label-1.err" | head -1)"
done
rm -rf "$model" "$out/m.aff" "$out/m.dspark.aff"
for f in "$out"/*.err; do  # a crashed aff-run's stack, for addr2line on the unstripped build
  [ -f "$f" ] && grep -q 'crashed with' "$f" && { echo "== $(basename "$f")"; grep -A40 'crashed with' "$f"; } >>"$summary"
done
[ $rc = 0 ] && note "dspark_gpu_device.sh: all passed" || note "dspark_gpu_device.sh: FAILURES"
exit $rc
