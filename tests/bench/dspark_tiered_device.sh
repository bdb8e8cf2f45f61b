#!/usr/bin/env bash
# DSpark drafting with the trunk's experts tiered (issue 18: "all-resident and tiered"), end to
# end through aff-run, with prebuilt portable binaries laid out as main_device_run.sh takes them
# (BIN/tests/make_geometry_container, BIN/tools/aff-run; tests/gpu/configure_portable.sh).
# dspark_gpu_bench measures the parts all resident; this measures what a user gets: a 4-layer
# container of V4-Flash-0731's geometry with its DSpark container beside it (random weights,
# make_geometry_container --dspark, about 19 GB, in a temporary directory), greedy decode of 48
# tokens after a 24-token prompt, all resident and with a slab of a quarter of the trunk's 1024
# experts (--gpu-expert-mib 2304: 256 experts of 8.6 MiB and a little), drafts off (the peer,
# same run), --draft dspark --draft-max 3 with the stages' experts in VRAM and in RAM, and
# --draft auto. Each row: decode tok/s, the ratio to drafts off, and the bound: drafts off
# times the tokens a verify call (what drafting would give if the verify call and the drafts
# cost no more than one step). Greedy tokens must equal drafts off's (exit 1 otherwise).
# usage: tests/bench/dspark_tiered_device.sh BIN OUT
set -uo pipefail
. "$(dirname "$0")/device_script.sh"
device_script_begin dspark_tiered_device.sh dspark-tiered "$@" || exit 2
geo=$work/v4-4x256.aff
if ! timeout 300 "$bin/tests/make_geometry_container" "$geo" --layers 4 --dspark -q; then
  note "FAIL make_geometry_container --layers 4 --dspark"
  exit 1
fi
note "make_geometry_container --layers 4 --dspark: ok in $((SECONDS - start)) s ($(du -sh "$work" | cut -f1))"

run() {  # name, flags...: aff-run's greedy decode, its log in OUT/name.err
  timeout 240 "$bin/tools/aff-run" -m "$geo" --tokens "$(seq -s, 1 24)" -n 48 --temp 0 --no-echo --ui plain \
    --dump-tokens "${@:2}" >"$out/$1.out" 2>"$out/$1.err"
}
tok_s() { grep -o 'decode [0-9]* tokens [0-9.]* tok/s' "$out/$1.err" | tail -1 | awk '{print $4}'; }

for mode in "resident:" "tiered:--gpu-expert-mib 2304"; do
  label=${mode%%:*}
  flags=${mode#*:}
  # shellcheck disable=SC2086
  if ! run "$label-off" --draft off $flags; then
    note "FAIL $label --draft off: $(tail -1 "$out/$label-off.err")"
    rc=1
    continue
  fi
  want=$(grep '^generated tokens:' "$out/$label-off.err")
  base=$(tok_s "$label-off")
  note "$label --draft off: $base tok/s (peer); $(grep -m1 -o 'experts: .*' "$out/$label-off.err" | cut -c1-160)"
  for d in "dspark-vram:--draft dspark --draft-max 3 --draft-placement vram" \
    "dspark-ram:--draft dspark --draft-max 3 --draft-placement ram" "auto:--draft auto"; do
    name=$label-${d%%:*}
    # shellcheck disable=SC2086
    if ! run "$name" ${d#*:} $flags; then
      note "FAIL $label ${d#*:}: $(tail -1 "$out/$name.err")"
      rc=1
      continue
    fi
    verdict=ok
    [ "$(grep '^generated tokens:' "$out/$name.err")" = "$want" ] || { verdict="FAIL tokens differ from --draft off"; rc=1; }
    got=$(tok_s "$name")
    per_call=$(grep -o '([0-9.]* tokens a verify call)' "$out/$name.err" | tail -1 | tr -d '(' | awk '{print $1}')
    line=$(grep '^aff-run: drafts:' "$out/$name.err" | tail -1)
    awk -v l="$label ${d#*:}" -v g="$got" -v b="$base" -v p="${per_call:-1}" -v v="$verdict" -v d="${line#aff-run: }" \
      'BEGIN { printf "%s: %s tok/s, %.2f x drafts off (bound %.1f tok/s = off x %s tokens a verify call); %s; %s\n", l, g, (b > 0 ? g / b : 0), b * p, p, v, (d == "" ? "no drafts line (auto kept to plain steps)" : d) }' |
      tee -a "$summary"
  done
done
exit $rc
