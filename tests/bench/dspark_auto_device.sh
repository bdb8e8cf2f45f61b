#!/usr/bin/env bash
# What `--draft auto` costs where DSpark drafting cannot win (issue 18: auto must then keep to
# plain steps at plain steps' speed), end to end through aff-run, with prebuilt portable
# binaries laid out as main_device_run.sh takes them (BIN/tests/make_geometry_container,
# BIN/tools/aff-run; tests/gpu/configure_portable.sh). A 4-layer container of
# V4-Flash-0731's geometry with its DSpark container beside it (random weights: almost no guess
# is kept, so drafting loses; make_geometry_container --dspark, about 19 GB in a temporary
# directory), greedy decode after a 24-token prompt of each of LENGTHS tokens (default
# "48 400 2000"; --ignore-eos), all resident: --draft off (the peer, same run) and --draft
# auto twice: first with no memory of an earlier run (its own empty $AFF_CACHE_DIR), then again
# from the memory the first left there (libaff/runtime/draft_memory.hpp). Each row: decode
# tok/s of each, auto's ratios (the bound: 1.00, plain steps' speed), auto's verify calls.
# Greedy tokens must equal drafts off's, and the second auto run must say it started from the
# memory (exit 1 otherwise).
# usage: tests/bench/dspark_auto_device.sh BIN OUT
set -uo pipefail
. "$(dirname "$0")/device_script.sh"
device_script_begin dspark_auto_device.sh dspark-auto "$@" || exit 2
geo=$work/v4-4x256.aff
if ! timeout 300 "$bin/tests/make_geometry_container" "$geo" --layers 4 --dspark -q; then
  note "FAIL make_geometry_container --layers 4 --dspark"
  exit 1
fi
note "make_geometry_container --layers 4 --dspark: ok in $((SECONDS - start)) s"
tok_s() { grep -o 'decode [0-9]* tokens [0-9.]* tok/s' "$out/$1.err" | tail -1 | awk '{print $4}'; }
for n in ${LENGTHS:-48 400 2000}; do
  rm -rf "$work/memory-$n"
  for d in off auto remembered; do
    if ! AFF_CACHE_DIR=$work/memory-$n timeout 240 "$bin/tools/aff-run" -m "$geo" --tokens "$(seq -s, 1 24)" -n "$n" \
        --ignore-eos --temp 0 --no-echo --ui plain --dump-tokens --draft "${d/remembered/auto}" \
        >"$out/$n-$d.out" 2>"$out/$n-$d.err"; then
      note "FAIL $n tokens --draft $d: $(tail -1 "$out/$n-$d.err")"
      rc=1
    fi
  done
  verdict=ok
  for d in auto remembered; do
    [ "$(grep '^generated tokens:' "$out/$n-$d.err")" = "$(grep '^generated tokens:' "$out/$n-off.err")" ] ||
      { verdict="FAIL $d: tokens differ from --draft off"; rc=1; }
  done
  grep -q '^aff-run: drafts: from ' "$out/$n-remembered.err" ||
    { verdict="FAIL the second auto run did not start from the memory"; rc=1; }
  off=$(tok_s "$n-off") auto=$(tok_s "$n-auto") again=$(tok_s "$n-remembered")
  calls=$(grep -o '[0-9][0-9]* verify calls' "$out/$n-auto.err" | tail -1)
  calls2=$(grep -o '[0-9][0-9]* verify calls' "$out/$n-remembered.err" | tail -1)
  awk -v n="$n" -v o="${off:-0}" -v a="${auto:-0}" -v r="${again:-0}" -v c="${calls:-0 verify calls}" \
    -v c2="${calls2:-0 verify calls}" -v v="$verdict" 'BEGIN {
      printf "%s tokens: drafts off %s tok/s (peer), auto %s tok/s = %.2f x off (bound 1.00; %s), ", n, o, a, (o > 0 ? a / o : 0), c
      printf "auto from its memory %s tok/s = %.2f x off (%s); %s\n", r, (o > 0 ? r / o : 0), c2, v }' |
    tee -a "$summary"
done
note "dspark_auto_device.sh: $([ $rc = 0 ] && echo passed || echo FAILURES) in $((SECONDS - start)) s"
exit $rc
