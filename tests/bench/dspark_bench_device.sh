#!/usr/bin/env bash
# DSpark drafting's cost and gain on the GPU at V4-Flash-0731's real geometry (issue 18), with
# prebuilt portable binaries laid out as main_device_run.sh takes them
# (BIN/tests/make_geometry_container, BIN/tests/dspark_gpu_bench; tests/gpu/configure_portable.sh):
# writes a 4-layer container (sliding, sliding, CSA, HCA; 256 experts) with its DSpark draft
# container beside it (make_geometry_container --dspark, about 19 GB together) in a temporary
# directory (not under OUT, whose files travel back), runs tests/bench/dspark_gpu_bench.cpp on
# it, removes the files. Writes the logs and a summary into OUT (the bench's output and the
# summary's lines on stdout); exits 1 if a step failed.
# usage: tests/bench/dspark_bench_device.sh BIN OUT
set -uo pipefail
. "$(dirname "$0")/device_script.sh"
device_script_begin dspark_bench_device.sh dspark-bench "$@" || exit 2
geo=$work/v4-4x256.aff
if timeout 240 "$bin/tests/make_geometry_container" "$geo" --layers 4 --dspark -q; then
  note "make_geometry_container --layers 4 --dspark: ok in $((SECONDS - start)) s ($(du -sh "$work" | cut -f1))"
  start=$SECONDS
  if timeout 300 "$bin/tests/dspark_gpu_bench" "$geo" 15 4 64 >"$out/bench.txt" 2>&1; then
    note "dspark_gpu_bench: ok in $((SECONDS - start)) s"
  else
    note "FAIL dspark_gpu_bench ($?): $(tail -2 "$out/bench.txt" | tr '\n' ' ')"
    rc=1
  fi
  cat "$out/bench.txt"
  cat "$out/bench.txt" >>"$summary"
else
  note "FAIL make_geometry_container --layers 4 --dspark ($?)"
  rc=1
fi
echo "== summary"
grep -E '^(FAIL|make_geometry|dspark_gpu_bench|part 1|figure|auto)' "$summary"
exit $rc
