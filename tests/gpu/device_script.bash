# shellcheck shell=bash disable=SC2034  # rc, geo, eager and family_s are read by the sourcing script
# What the device scripts (tests/gpu/*_device.sh, run by the lead on a machine with a GPU)
# share, so that each says only what it checks: the BIN OUT arguments, the summary file and
# note/fail, the run of a device family of aff_gpu_tests, aff-run with its logs in OUT, and the
# heat cases' eager mover flags. Sourced, not run, right after `set -uo pipefail`:
#     source "$(dirname "$0")/device_script.bash" "$@"
# It sets bin (BIN, absolute), out (OUT, created, absolute), repo (the source tree), summary
# (OUT/summary.txt, emptied) and rc=0, and exports AFF_TEST_DATA. The usage message names the
# sourcing script ($0).
bin=$(cd "${1:?usage: $(basename "$0") BIN OUT}" && pwd) || exit 2
out=${2:?usage: $(basename "$0") BIN OUT}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
repo=$(cd "$(dirname "$0")/../.." && pwd)
export AFF_TEST_DATA=$repo/tests/data
rc=0
summary=$out/summary.txt
: >"$summary"

note() { echo "$*" | tee -a "$summary"; }
fail() { note "FAIL $*"; rc=1; }

# gpu_tests SECONDS FAMILY: aff_gpu_tests FAMILY, at most SECONDS, its output in OUT/FAMILY.txt;
# returns its status and leaves the seconds it took in family_s.
gpu_tests() {
  local start=$SECONDS status
  timeout "$1" "$bin/tests/aff_gpu_tests" "$2" >"$out/$2.txt" 2>&1
  status=$?
  family_s=$((SECONDS - start))
  return $status
}

# gpu_family SECONDS FAMILY: gpu_tests, then the line "aff_gpu_tests FAMILY: ok|FAILED (status)
# in N s; <its last line>" and its failed rows (30 at most) into the summary; rc=1 when it failed.
gpu_family() {
  local t=ok
  gpu_tests "$1" "$2" || { t="FAILED ($?)"; rc=1; }
  note "aff_gpu_tests $2: $t in $family_s s; $(tail -1 "$out/$2.txt")"
  grep 'FAIL$' "$out/$2.txt" | head -30 >>"$summary"
}

# aff_run SECONDS LOG FLAGS...: BIN's aff-run with FLAGS, at most SECONDS, stdout into
# OUT/LOG.out and stderr into OUT/LOG.err; returns its status.
aff_run() {
  local seconds=$1 log=$2
  shift 2
  timeout "$seconds" "$bin/tools/aff-run" "$@" >"$out/$log.out" 2>"$out/$log.err"
}

# The tier scripts' (tiers_device.sh, ssd_tier_device.sh) container and runs:
# geometry_container PATH FLAGS...: sets geo=PATH and writes there a container of V4-Flash's
# geometry (BIN's make_geometry_container PATH FLAGS -q, at most 120 s), or says
# "FAIL make_geometry_container" and exits 1.
geometry_container() {
  geo=$1
  if ! timeout 120 "$bin/tests/make_geometry_container" "$@" -q; then
    note "FAIL make_geometry_container"
    exit 1
  fi
}
# logits_run LOG FLAGS...: aff_run (120 s) on $geo with a 40-token prompt and 8 forced steps,
# every position's and step's logits into OUT/LOG.logits (what the scripts compare with cmp).
logits_run() {
  aff_run 120 "$1" -m "$geo" --tokens "$(seq -s, 1 40)" --force-tokens "$(seq -s, 100 107)" --no-echo --ui plain \
    --logits-out "$out/$1.logits" "${@:2}"
}

# eager_flags STRATEGY: sets the array eager to aff-run's mover flags for STRATEGY: for heat,
# replay's eager knobs (placement::HeatOptions{}: 4 moves a dispatch, min gain 0.5, hysteresis
# 0.25), not the GPU mover's reluctant defaults, which rightly move nothing on the random
# models' near-uniform routing, while the moving path is what the heat cases test (the C++
# tests' eager_heat, tests/gpu/device_test.hpp); none for the other strategies.
eager_flags() {
  eager=()
  if [ "$1" = heat ]; then eager=(--placement-moves 4 --placement-min-gain 0.5 --placement-hysteresis 0.25); fi
}
