#!/usr/bin/env bash
# Issue 15's device run: the expert table, the one TQ2875 window decoder, GpuModel::Impl's
# split and the GPU rewind were meant to change no behaviour, and this script checks that on a
# GPU with binaries built elsewhere (tests/gpu/configure_portable.sh), in one go:
#   1. tests: aff_gpu_tests (after) on the families these changes touch (expert_table,
#      rewind, the kernels whose code was shared out, container, decode, forward, snapshot;
#      multi_gpu too when two GPUs are visible);
#   2. parity: aff-run before and after on the same inputs, every prompt position's and forced
#      decode step's logits written with --logits-out and compared byte for byte (cmp):
#      tiny-a, tiny-a-fp8, tiny-b, tiny-c, tiny-trained (checkpoints), the same quantised by aff-quantize
#      (after), the shipped containers (tests/data/models/*.aff), and a 4-layer real-geometry container (make_geometry_container: codebook
#      experts through moe_gemv and moe_gemm); prompts of 3 tokens (GEMV prefill) and 40 (GEMM
#      prefill), each then 8 forced decode steps (captured graphs);
#   3. bench: decode_bench before, after, before, after on the geometry container (the
#      expert table's cost: compare the "figure" lines of the pairs).
# Prints a summary; exits 1 if a test or a parity case failed (the bench only reports).
#
# usage, where the binaries are built (two build dirs: main before the change, and after):
#   tests/gpu/issue15_device.sh pack BUILD_BEFORE BUILD_AFTER DIR
#       copies and strips the binaries into DIR/before and DIR/after (DIR in .git/info/exclude)
# on the device machine, from the repository root (tests/data travels with the tree):
#   tests/gpu/issue15_device.sh run DIR [tests] [parity] [bench]     (default: all three)
#   environment: OUT (results folder, default /tmp/issue15), GEO (container path, default
#   $OUT/g4.aff: made once with the after build's make_geometry_container --layers GEO_LAYERS,
#   default 4; 0: no geometry container), BENCH_ROUNDS (before/after pairs of decode_bench, default
#   2), PARITY_GPUS (aff-run's --gpus in the parity part, default 1; 0 runs it on the CPU
#   reference, which needs only aff-run before and aff-run, aff-quantize after).
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
after_bins=(aff_gpu_tests decode_bench make_geometry_container aff-run aff-quantize)
before_bins=(decode_bench aff-run)

where() {  # a binary of a build dir: tests/ or tools/
  local b=$1 n=$2
  for d in "$b/tests" "$b/tools" "$b"; do [ -x "$d/$n" ] && { echo "$d/$n"; return 0; }; done
  echo "issue15_device.sh: no $n in $b" >&2
  return 1
}

if [ "${1:-}" = pack ]; then
  [ $# = 4 ] || { echo "usage: $0 pack BUILD_BEFORE BUILD_AFTER DIR" >&2; exit 2; }
  mkdir -p "$4/before" "$4/after" || exit 1
  for n in "${before_bins[@]}"; do f=$(where "$2" "$n") || exit 1; cp "$f" "$4/before/$n" && strip "$4/before/$n"; done
  for n in "${after_bins[@]}"; do f=$(where "$3" "$n") || exit 1; cp "$f" "$4/after/$n" && strip "$4/after/$n"; done
  du -sh "$4"
  exit 0
fi

[ "${1:-}" = run ] && [ $# -ge 2 ] || { echo "usage: $0 pack BUILD_BEFORE BUILD_AFTER DIR | run DIR [tests] [parity] [bench]" >&2; exit 2; }
bins=$(cd "$2" && pwd) || exit 1
parts=("${@:3}")
[ ${#parts[@]} -gt 0 ] || parts=(all)
for w in "${parts[@]}"; do
  case $w in tests|parity|bench|all) ;; *) echo "issue15_device.sh: unknown part '$w'" >&2; exit 2 ;; esac
done
wanted() { local w; for w in "${parts[@]}"; do [ "$w" = "$1" ] || [ "$w" = all ] && return 0; done; return 1; }
need() { local side=$1 n; shift; for n in "$@"; do [ -x "$bins/$side/$n" ] || { echo "issue15_device.sh: missing $bins/$side/$n" >&2; exit 1; }; done; }
wanted tests && need after aff_gpu_tests
wanted parity && need before aff-run && need after aff-run aff-quantize
wanted bench && need before decode_bench && need after decode_bench make_geometry_container
[ "${GEO_LAYERS:-4}" != 0 ] && wanted parity && need after make_geometry_container
out=${OUT:-/tmp/issue15}
mkdir -p "$out" || exit 1
geo=${GEO:-$out/g4.aff}
export AFF_TEST_DATA="$src/tests/data"
summary=()
failed=0
note() { summary+=("$1"); echo "== $1"; }

make_geometry() {
  [ "${GEO_LAYERS:-4}" = 0 ] && return 1
  [ -f "$geo" ] && return 0
  echo "== make_geometry_container $geo --layers ${GEO_LAYERS:-4}"
  "$bins/after/make_geometry_container" "$geo" --layers "${GEO_LAYERS:-4}" || { note "FAIL make_geometry_container"; failed=1; return 1; }
}

if wanted tests; then
  families=(expert_table rewind moe_gemv moe_gemm fp8_gemv bf16_gemv rms_norm hc compressor indexer container decode
            forward snapshot)
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  [ "${gpus:-0}" -ge 2 ] && families+=(multi_gpu)
  echo "== aff_gpu_tests ${families[*]}"
  "$bins/after/aff_gpu_tests" "${families[@]}" 2>&1 | tee "$out/tests.txt"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^[0-9]+ checks, [0-9]+ failed' "$out/tests.txt" | tail -1)
  fams=$(awk '$NF=="PASS"||$NF=="FAIL"{print $1}' "$out/tests.txt" | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')
  if [ "$rc" = 0 ]; then note "PASS tests: ${line:-?} (${fams%, })"
  else note "FAIL tests (rc $rc): ${line:-no summary line} (${fams%, })"; failed=1
       grep -E ' FAIL$' "$out/tests.txt" | head -20 | while read -r l; do echo "   $l"; done; fi
fi

if wanted parity; then
  # The prompts and forced tokens: fixed ids under every fixture's vocabulary (the tiny ones
  # have 256; tiny-trained 2048; the geometry container the real 129280).
  short="3,17,101"
  long=$(seq -s, 3 6 237)             # 40 ids
  forced="5,77,130,2,64,250,19,201"   # 8 decode steps
  fixtures=(tiny-a tiny-a-fp8 tiny-b tiny-c tiny-trained)
  models=()
  for t in "${fixtures[@]}"; do models+=("$AFF_TEST_DATA/models/$t"); done
  for t in "${fixtures[@]}"; do
    q="$out/$t.aff"
    if [ -f "$q" ] || SOURCE_DATE_EPOCH=1764547200 "$bins/after/aff-quantize" --src "$AFF_TEST_DATA/models/$t" --out "$q" >"$out/quantize-$t.log" 2>&1; then
      models+=("$q")
    else
      note "FAIL aff-quantize $t (see $out/quantize-$t.log)"; failed=1
    fi
  done
  for f in "$AFF_TEST_DATA"/models/*.aff; do models+=("$f"); done  # the shipped containers (tiny-trained.aff)
  make_geometry && models+=("$geo")
  same=0 differ=0
  for m in "${models[@]}"; do
    name=$(basename "$m")
    for p in short long; do
      toks=${!p}
      for side in before after; do
        "$bins/$side/aff-run" -m "$m" --tokens "$toks" --force-tokens "$forced" -n 8 --gpus "${PARITY_GPUS:-1}" --temp 0 --no-echo \
          --logits-out "$out/$name.$p.$side.logits" >"$out/$name.$p.$side.log" 2>&1 ||
          echo "   aff-run $side failed on $name ($p): $(tail -1 "$out/$name.$p.$side.log")"
      done
      if [ -s "$out/$name.$p.before.logits" ] && cmp -s "$out/$name.$p.before.logits" "$out/$name.$p.after.logits"; then
        same=$((same + 1)); echo "   same   $name $p ($(stat -c %s "$out/$name.$p.after.logits") bytes)"
      else
        differ=$((differ + 1)); echo "   DIFFER $name $p"
      fi
    done
  done
  if [ $differ = 0 ] && [ $same -gt 0 ]; then note "PASS parity: $same cases, logits byte-identical before/after"
  else note "FAIL parity: $differ of $((same + differ)) cases differ"; failed=1; fi
fi

if wanted bench; then
  if make_geometry; then
    rounds=$(seq "${BENCH_ROUNDS:-2}")
    for round in $rounds; do
      for side in before after; do
        echo "== decode_bench $side (round $round)"
        "$bins/$side/decode_bench" "$geo" 16 2>&1 | tee "$out/bench.$side.$round.txt" | tail -4
      done
    done
    for round in $rounds; do
      for side in before after; do
        steps=$(grep -oE 'vs graph [0-9.]+ ms' "$out/bench.$side.$round.txt" | awk '{printf "%s ms, ", $3}')
        note "bench $side $round: 4-layer graph step (batch 1, batch 4): ${steps%, }; $(grep -m1 '^figure' "$out/bench.$side.$round.txt" | sed 's/.*graph replay): //')"
      done
    done
  fi
fi

echo
echo "== issue15_device.sh summary"
for s in "${summary[@]}"; do echo "$s"; done
exit $failed
