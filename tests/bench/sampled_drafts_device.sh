#!/usr/bin/env bash
# Sampled generation with drafts, accepted on the device (issue 18: "acceptance on the device,
# no host round trip per token"), with prebuilt portable binaries laid out as main_device_run.sh
# takes them (BIN/tests/{make_geometry_container,greedy_picks_bench}, BIN/tools/aff-run;
# tests/gpu/configure_portable.sh). Two parts:
#   1. greedy_picks_bench on a 4-layer container of V4-Flash's geometry with its MTP layer
#      (random weights, V = 129 280, in a temporary directory): a decode step and a verify call
#      of 4 through the logits path (rows back, the host's Sampler; the peer) and through
#      forward_ids with draws (kernels/speculative_rows), greedy and at T 0.8;
#   2. aff-run at T 0.8 (no other filter: the drawn-picks path) on that container and on the
#      trained tiny model (the checkpoint tests/data/models/tiny-trained: its container has no MTP layer),
#      --draft off (the peer, same run), mtp k = 1 and 3, and auto. Each row: decode tok/s, the
#      ratio to drafts off, and the bound: drafts off times the tokens a verify call.
# usage: tests/bench/sampled_drafts_device.sh BIN OUT
set -uo pipefail
. "$(dirname "$0")/device_script.sh"
device_script_begin sampled_drafts_device.sh sampled-drafts "$@" || exit 2
repo=$(cd "$(dirname "$0")/../.." && pwd)
geo=$work/v4-4x256-mtp.aff
if ! timeout 300 "$bin/tests/make_geometry_container" "$geo" --layers 4 --mtp -q; then
  note "FAIL make_geometry_container --layers 4 --mtp"
  exit 1
fi
note "make_geometry_container --layers 4 --mtp: ok in $((SECONDS - start)) s ($(du -sh "$work" | cut -f1))"
if timeout 200 "$bin/tests/greedy_picks_bench" "$geo" 64 >"$out/picks_bench.txt" 2>&1; then
  tee -a "$summary" <"$out/picks_bench.txt"
else
  note "FAIL greedy_picks_bench: $(tail -2 "$out/picks_bench.txt")"
  rc=1
fi

tok_s() { grep -o 'decode [0-9]* tokens [0-9.]* tok/s' "$out/$1.err" | tail -1 | awk '{print $4}'; }
for target in "geometry:$geo:48" "tiny-trained:$repo/tests/data/models/tiny-trained:200"; do
  IFS=: read -r label model n <<<"$target"
  run() {  # name, flags...: aff-run's sampled decode, its log in OUT/name.err
    timeout 240 "$bin/tools/aff-run" -m "$model" --tokens "$(seq -s, 1 24)" -n "$n" --temp 0.8 --seed 7 --ignore-eos --no-echo \
      --ui plain "${@:2}" >"$out/$1.out" 2>"$out/$1.err"
  }
  if ! run "$label-off" --draft off; then
    note "FAIL $label --draft off: $(tail -1 "$out/$label-off.err")"
    rc=1
    continue
  fi
  base=$(tok_s "$label-off")
  note "$label T 0.8 --draft off: $base tok/s (peer)"
  for d in "mtp-k1:--draft mtp --draft-max 1" "mtp-k3:--draft mtp --draft-max 3" "auto:--draft auto"; do
    name=$label-${d%%:*}
    # shellcheck disable=SC2086
    if ! run "$name" ${d#*:}; then
      note "FAIL $label ${d#*:}: $(tail -1 "$out/$name.err")"
      rc=1
      continue
    fi
    got=$(tok_s "$name")
    per_call=$(grep -o '([0-9.]* tokens a verify call)' "$out/$name.err" | tail -1 | tr -d '(' | awk '{print $1}')
    line=$(grep '^aff-run: drafts:' "$out/$name.err" | tail -1)
    awk -v l="$label T 0.8 ${d#*:}" -v g="$got" -v b="$base" -v p="${per_call:-1}" -v d="${line#aff-run: }" \
      'BEGIN { printf "%s: %s tok/s, %.2f x drafts off (bound %.1f tok/s = off x %s tokens a verify call); %s\n", l, g, (b > 0 ? g / b : 0), b * p, p, (d == "" ? "no drafts line (auto kept to plain steps)" : d) }' |
      tee -a "$summary"
  done
done
exit $rc
