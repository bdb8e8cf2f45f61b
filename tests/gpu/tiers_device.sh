#!/usr/bin/env bash
# The expert tiers on a GPU (issue 17), with prebuilt portable binaries laid out as
# main_device_run.sh takes them (BIN/tests/aff_gpu_tests, BIN/tests/make_geometry_container,
# BIN/tools/aff-run; tests/gpu/configure_portable.sh): first the device family `tiers`, then end
# to end through aff-run's flags: a 2-layer, 16-expert container of V4-Flash's geometry, run all
# resident, then with the slab capped by --gpu-expert-mib at half the experts (138 MiB: 16
# slots of 9043968 bytes), one slot (9 MiB) and none (0), the mover static, demand and heat.
# Every prompt position's and forced step's logits (--logits-out: a 40-token prompt, 8 forced
# steps) must equal the all-resident run's byte for byte (cmp), the start-up line must say the
# experts are tiered and the end line give the hit rates. Then aff-run with --gpu-mib below the
# model and no tier flag (tiered by itself, same logits), and aff-gpucheck's tiered check on the
# container. Writes the logs and a summary into
# OUT; exits 1 if a check failed.
# usage: tests/gpu/tiers_device.sh BIN OUT
set -uo pipefail
source "$(dirname "$0")/device_script.bash" "$@"

gpu_family 480 tiers
grep '^tiers: ' "$out/tiers.txt" >>"$summary"

geometry_container "$out/v4-2x16.aff" --layers 2 --experts 16 --vocab 4096
if ! logits_run resident; then
  note "FAIL aff-run all resident: $(tail -1 "$out/resident.err")"
  exit 1
fi
grep -q 'experts tiered' "$out/resident.err" && { note "FAIL the all-resident run says tiered"; rc=1; }
for case in "half-static 138 static" "half-heat 138 heat" "half-demand 138 demand" "one-demand 9 demand" \
            "one-heat 9 heat" "none-static 0 static"; do
  read -r name mib strategy <<<"$case"
  eager_flags "$strategy"  # heat: replay's eager knobs (device_script.bash says why)
  if ! logits_run "$name" --gpu-expert-mib "$mib" --placement-strategy "$strategy" "${eager[@]}"; then
    note "FAIL aff-run $name: $(tail -1 "$out/$name.err")"
    rc=1
    continue
  fi
  verdict=ok
  cmp -s "$out/resident.logits" "$out/$name.logits" || verdict="FAIL logits differ"
  grep -q 'experts tiered' "$out/$name.err" || verdict="FAIL no tiers line"
  grep -q '^aff-run: experts (' "$out/$name.err" || verdict="FAIL no end line"
  [ "$verdict" = ok ] || rc=1
  note "aff-run --gpu-expert-mib $mib --placement-strategy $strategy: $verdict; $(grep '^aff-run: experts (' "$out/$name.err")"
done
# No flag beyond -m: a card smaller than the model (--gpu-mib stands in for it: the resident
# part the half-static run reported, the derived headroom and about 16 experts' 138 MiB) and
# no tier flag: tiered by itself, logits byte-identical.
res=$(sed -n 's/.*less \([0-9]*\) MiB resident.*/\1/p' "$out/half-static.err" | head -1)
if [ -z "$res" ]; then
  note "FAIL no-flag: no resident size in the half-static run's tiers line"
  rc=1
else
  # The derived headroom is 256 MiB or 3 % of the cap, whichever is more: leave room for both.
  cap=$((res + 140 + 256))
  pct=$(((res + 140) * 100 / 97 + 1))
  [ "$pct" -gt "$cap" ] && cap=$pct
  if logits_run noflag --gpu-mib "$cap"; then
    verdict=ok
    cmp -s "$out/resident.logits" "$out/noflag.logits" || verdict="FAIL logits differ"
    grep -q 'experts tiered (the model needs' "$out/noflag.err" || verdict="FAIL not tiered by itself"
    [ "$verdict" = ok ] || rc=1
    note "aff-run --gpu-mib $cap, no tier flag: $verdict; $(grep 'experts tiered' "$out/noflag.err" | head -1)"
  else
    note "FAIL aff-run --gpu-mib $cap: $(tail -1 "$out/noflag.err")"
    rc=1
  fi
fi
# aff-gpucheck's tiered check on the same container (quarter of the experts in the slab).
if [ -x "$bin/tools/aff-gpucheck" ]; then
  timeout 120 "$bin/tools/aff-gpucheck" -m "$geo" --no-forward -q >"$out/gpucheck.txt" 2>&1
  g=$?
  tiers_rows=$(grep -c '^tiers' "$out/gpucheck.txt")
  if [ $g = 0 ] && [ "$tiers_rows" -ge 3 ]; then
    note "aff-gpucheck tiered check: ok ($tiers_rows tiers rows); $(tail -1 "$out/gpucheck.txt")"
  else
    note "FAIL aff-gpucheck (status $g, $tiers_rows tiers rows): $(grep -E '^tiers|FAIL' "$out/gpucheck.txt" | head -5)"
    rc=1
  fi
  grep '^tiers' "$out/gpucheck.txt" >>"$summary"
else
  note "FAIL no $bin/tools/aff-gpucheck"
  rc=1
fi
[ $rc = 0 ] && note "tiers_device.sh: all passed" || note "tiers_device.sh: FAILURES"
exit $rc
