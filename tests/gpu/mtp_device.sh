#!/usr/bin/env bash
# MTP drafts on a GPU (issue 18), with prebuilt portable binaries laid out as main_device_run.sh
# takes them (BIN/tests/aff_gpu_tests, BIN/tools/aff-run, BIN/tests/mtp_gpu_bench,
# BIN/tests/make_geometry_container; tests/gpu/configure_portable.sh): first the device family
# `mtp` (GpuModel::mtp_forward against the CPU's, greedy identity with drafts through
# generate, the greedy chain on the device against host picks, the drafter's ring after
# rejections), after `argmax` (the device pick against the host's); then end to end through aff-run on the GPU:
# tiny-trained's greedy output with --draft mtp --draft-max 1, 3 and 5 must be byte for byte
# the output with --draft off, stderr naming the drafter and closing with its acceptance line,
# and --draft auto must name the gated drafter and give the same output; --draft-placement
# ram is refused there (dense experts) and, on the geometry container below, gives the tokens
# of --draft off with the MTP layer's experts in RAM, all resident and tiered; then the speed of
# drafting (tests/bench/mtp_gpu_bench.cpp: the trained model's acceptance and tok/s on the
# GPU, and the verify, draft and replay costs on a 2-layer, 128-expert container of
# V4-Flash's geometry with an MTP layer, written here and removed after). Writes the logs and
# a summary into OUT; exits 1 if a check failed. Aimed at under 240 s on an H200.
# usage: tests/gpu/mtp_device.sh BIN OUT
set -uo pipefail
source "$(dirname "$0")/device_script.bash" "$@"

gpu_family 60 argmax
gpu_family 200 mtp
grep -A40 'crashed with' "$out/mtp.txt" >>"$summary"
grep '^mtp ' "$out/mtp.txt" | head -150 >>"$summary"

model=$repo/tests/data/models/tiny-trained
run() {  # name, flags...
  aff_run 60 "$1" -m "$model" -p 'def fibonacci(n):' -n 48 --temp 0 --ui plain "${@:2}"
}
if ! run plain --draft off; then
  note "FAIL aff-run --draft off on the GPU: $(tail -1 "$out/plain.err")"
  rc=1
else
  for k in 1 3 5; do
    if ! run "mtp$k" --draft mtp --draft-max $k; then
      note "FAIL aff-run --draft mtp --draft-max $k on the GPU: $(tail -1 "$out/mtp$k.err")"
      rc=1
      continue
    fi
    verdict=ok
    cmp -s "$out/plain.out" "$out/mtp$k.out" || verdict="FAIL output differs from --draft off"
    grep -qx "aff-run: drafts: mtp, up to $k a step" "$out/mtp$k.err" || verdict="FAIL no drafter line"
    line=$(grep '^aff-run: drafts: [0-9]* verify calls' "$out/mtp$k.err")
    [ -n "$line" ] || verdict="FAIL no acceptance line"
    [ "$verdict" = ok ] || rc=1
    note "aff-run GPU --draft mtp --draft-max $k: $verdict; ${line#aff-run: }; $(grep -o '[0-9.]* tok/s' "$out/mtp$k.err" | tail -1)"
  done
  note "aff-run GPU --draft off: $(grep -o '[0-9.]* tok/s' "$out/plain.err" | tail -1)"
  if run auto; then
    grep -qx 'aff-run: drafts: mtp, up to 3 a step, while faster than without' "$out/auto.err" &&
      cmp -s "$out/plain.out" "$out/auto.out" && note "aff-run GPU --draft auto: gated drafter, same output" ||
      { note "FAIL aff-run GPU --draft auto: $(grep 'drafts' "$out/auto.err" | head -2 | tr '\n' ' ')"; rc=1; }
  else
    note "FAIL aff-run GPU --draft auto: $(tail -1 "$out/auto.err")"
    rc=1
  fi
fi

# --draft-placement ram on tiny-trained (dense expert stacks): refused, exit 1, one line.
aff_run 60 dense-ram -m "$model" -p 'def f' -n 4 --temp 0 --draft mtp --draft-placement ram
status=$?
if [ $status = 1 ] && tail -1 "$out/dense-ram.err" | grep -q -- '^aff-run: --draft-placement ram: '; then
  note "aff-run GPU --draft-placement ram with dense experts: refused (exit 1): $(tail -1 "$out/dense-ram.err")"
else
  note "FAIL aff-run GPU --draft-placement ram with dense experts: exit $status: $(head -3 "$out/dense-ram.err" | tr '\n' ' ')"
  rc=1
fi

geo=$out/v4-2x128-mtp.aff
start=$SECONDS
if timeout 120 "$bin/tests/make_geometry_container" "$geo" --layers 2 --experts 128 --mtp -q; then
  # --draft-placement on the container (codebook-stored experts): the MTP layer's experts in
  # VRAM and in RAM, all resident and tiered (a 32-expert slab; auto puts them in RAM there),
  # give the same generated tokens as --draft off; the start-up line says where they are.
  placed() {  # name, flags...
    aff_run 120 "$1" -m "$geo" --tokens "$(seq -s, 1 24)" -n 32 --temp 0 --no-echo --ui plain --dump-tokens "${@:2}"
  }
  slab=$((32 * 9))  # MiB: 32 experts of 8.6 MiB and a little
  if placed geo-off --draft off; then
    want=$(grep '^generated tokens:' "$out/geo-off.err")
    for case in "vram --draft-placement vram:in VRAM" "ram --draft-placement ram:in RAM" \
      "tiered-auto --gpu-expert-mib $slab:in RAM" "tiered-vram --gpu-expert-mib $slab --draft-placement vram:in VRAM"; do
      flags=${case%%:*}
      where=${case#*:}
      name=geo-${flags%% *}
      # shellcheck disable=SC2086
      if ! placed "$name" --draft mtp --draft-max 3 ${flags#* }; then
        note "FAIL aff-run GPU geometry --draft mtp ${flags#* }: $(tail -1 "$out/$name.err")"
        rc=1
        continue
      fi
      verdict=ok
      [ "$(grep '^generated tokens:' "$out/$name.err")" = "$want" ] || verdict="FAIL tokens differ from --draft off"
      grep -q "MTP layer on the GPU, its routed experts $where" "$out/$name.err" || verdict="FAIL start-up line does not say $where"
      line=$(grep '^aff-run: drafts: [0-9]* verify calls' "$out/$name.err")
      [ -n "$line" ] || verdict="FAIL no acceptance line"
      [ "$verdict" = ok ] || rc=1
      note "aff-run GPU geometry --draft mtp ${flags#* }: $verdict (experts $where); ${line#aff-run: }"
    done
  else
    note "FAIL aff-run GPU geometry --draft off: $(tail -1 "$out/geo-off.err")"
    rc=1
  fi
  if timeout 300 "$bin/tests/mtp_gpu_bench" "$model" "$model/results.json" "$geo" 4 64 64 15 >"$out/bench.txt" 2>&1; then
    note "mtp_gpu_bench: ok in $((SECONDS - start)) s (container included)"
  else
    note "FAIL mtp_gpu_bench ($?): $(tail -2 "$out/bench.txt" | tr '\n' ' ')"
    rc=1
  fi
  cat "$out/bench.txt" >>"$summary"
else
  note "FAIL make_geometry_container --mtp"
  rc=1
fi
rm -f "$geo"
for f in "$out"/*.err; do  # a crashed aff-run's stack, for addr2line on the unstripped build
  [ -f "$f" ] && grep -q 'crashed with' "$f" && { echo "== $(basename "$f")"; grep -A40 'crashed with' "$f"; } >>"$summary"
done
[ $rc = 0 ] && note "mtp_device.sh: all passed" || note "mtp_device.sh: FAILURES"
exit $rc
