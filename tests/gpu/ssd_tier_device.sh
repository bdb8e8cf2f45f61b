#!/usr/bin/env bash
# The SSD tier of the expert tiers on a GPU (issue 17), with prebuilt portable binaries laid out
# as main_device_run.sh takes them (BIN/tests/aff_gpu_tests, BIN/tests/make_geometry_container,
# BIN/tools/aff-run; tests/gpu/configure_portable.sh): first the device family `ssd_tier` with
# its temporary files under OUT (on the disk, not /dev/shm: TMPDIR), then end to end through
# aff-run's flags on a 4-layer, 16-expert container of V4-Flash's geometry written into OUT (64
# experts of 9043968 bytes, 8.625 MiB; layers 0-2 hash-routed, 3 learned): all resident, then
# with the slab capped by --gpu-expert-mib and the pool by --host-pool-mib so that experts land
# on the SSD: 36 MiB each (4 slots each, 56 experts on the SSD) with the mover static, demand and
# heat, 36 MiB of slab and no pool (60 on the SSD: every victim dropped back there) with demand
# and heat, and 0 and 0 (all 64 on the SSD). The moving cases (issue 17) must run the strategy
# asked for (the start-up line names it) and demand must promote from the SSD. Every prompt position's and forced step's logits
# (--logits-out: a 40-token prompt, 8 forced steps) must equal the all-resident run's byte for
# byte (cmp); the start-up line must say how many experts are on the SSD and that they are read
# with O_DIRECT, the end line give the SSD reads. Prints the O_DIRECT read rate of the disk (dd,
# one stream of 2 MiB blocks) and the one the runs saw (the end line's bytes over the time the
# host waited for them: 8 threads of 2 MiB pieces). About 60-90 s on an H200.
# Writes the logs and a summary into OUT; exits 1 if a check failed.
# usage: tests/gpu/ssd_tier_device.sh BIN OUT
set -uo pipefail
source "$(dirname "$0")/device_script.bash" "$@"
note "ssd_tier_device.sh: OUT on $(df -T "$out" | awk 'NR==2 {print $2 " (" $1 ")"}')"

mkdir -p "$out/tmp"
if TMPDIR=$out/tmp gpu_tests 240 ssd_tier; then t=PASS; else t="FAIL ($?)"; rc=1; fi
note "$t aff_gpu_tests ssd_tier in $family_s s; $(tail -1 "$out/ssd_tier.txt")"
grep 'FAIL$' "$out/ssd_tier.txt" | head -30 >>"$summary"
grep '^ssd_tier: ' "$out/ssd_tier.txt" >>"$summary"
rm -rf "$out/tmp"

geometry_container "$out/v4-4x16.aff" --layers 4 --experts 16 --vocab 4096
# The disk's own O_DIRECT rate on that file, for comparison (one stream of 2 MiB reads).
note "O_DIRECT read rate (dd, 2 MiB blocks, one stream): $(dd if="$geo" of=/dev/null bs=2M iflag=direct 2>&1 | tail -1)"
if ! logits_run resident; then
  note "FAIL aff-run all resident: $(tail -1 "$out/resident.err")"
  exit 1
fi
for case in "small-static 36 36 static 56" "small-demand 36 36 demand 56" "small-heat 36 36 heat 56" \
  "nopool-demand 36 0 demand 60" "nopool-heat 36 0 heat 60" "none-static 0 0 static 64"; do
  read -r name slab pool strategy ssd <<<"$case"
  t0=$SECONDS
  eager_flags "$strategy"  # heat: replay's eager knobs (device_script.bash says why)
  if ! logits_run "$name" --gpu-expert-mib "$slab" --host-pool-mib "$pool" --placement-strategy "$strategy" "${eager[@]}"; then
    note "FAIL aff-run $name: $(tail -1 "$out/$name.err")"
    rc=1
    continue
  fi
  verdict=PASS
  cmp -s "$out/resident.logits" "$out/$name.logits" || verdict="FAIL logits differ"
  grep -q " $ssd on the SSD" "$out/$name.err" || verdict="FAIL the start-up line does not say $ssd on the SSD"
  grep -q 'SSD experts by O_DIRECT reads' "$out/$name.err" || verdict="FAIL the SSD experts are not read with O_DIRECT"
  grep -q '; SSD: [1-9][0-9]* expert reads' "$out/$name.err" || verdict="FAIL no SSD reads in the end line"
  grep -q "; placement $strategy" "$out/$name.err" || verdict="FAIL the start-up line does not name placement $strategy"
  if [ "$strategy" = demand ] && ! grep -q ' [1-9][0-9]* promoted' "$out/$name.err"; then
    verdict="FAIL demand promoted nothing from the SSD"
  fi
  [ "$verdict" = PASS ] || rc=1
  note "$verdict aff-run --gpu-expert-mib $slab --host-pool-mib $pool --placement-strategy $strategy ($((SECONDS - t0)) s): $(grep -o 'SSD: [^;]*' "$out/$name.err" | tail -1)"
done
grep -h -o '[0-9.]* MB/s over the [0-9.]* s waited' "$out"/*.err | sed 's/^/O_DIRECT read rate (aff-run): /' | tee -a "$summary"
grep -h 'experts tiered' "$out/none-static.err" | head -1 >>"$summary"
[ $rc = 0 ] && note "ssd_tier_device.sh: all passed in $SECONDS s" || note "ssd_tier_device.sh: FAILURES"
exit $rc
