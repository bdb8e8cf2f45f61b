#!/usr/bin/env bash
# Issue 17's scenarios on one GPU (tests/bench/tiers_bench.cpp does the work): a real-geometry
# container with the v4flash routing skew (make_geometry_container --route-skew v4flash), then
# decode at batch 1 and 4 all resident and with the expert slab capped at what a 24, 32 and
# 64 GiB card would hold of the whole V4-Flash (the arithmetic is printed per scenario), the
# rest in the pinned host pool; per scenario ms a token, hit rate per tier, moves and mover
# stalls, the floor (HBM and mapped-read ceilings measured in the same run) and the ratio.
# Layers: LAYERS (default 6). Why 6 on the H200 machine (64 GiB disk, 128 GiB RAM, ~200 s):
# a layer is 256 experts x 8.625 MiB = 2.16 GiB of experts plus ~0.13 GiB dense, the embedding
# and head 2 GiB: 6 layers make a ~15.7 GiB file (~20 s to write at the 4-layer container's
# 0.83 GiB/s), which stays in the page cache beside the largest pool (the 24 GiB card keeps 15 %
# in the slab: 85 % of 12.9 GiB = 11 GiB pinned, ~7 s at the measured 1.7 GiB/s of pinning);
# each scenario's build reads the 12.9 GiB of experts again (~5-10 s) and its timed decode at
# ~12 GB/s over the bus takes ~2 s (batch 1) and ~7 s (batch 4): about 120 s in all,
# ~140 s with the trace. 8 layers
# would take ~160 s and leave no margin. Each card runs the bench's three mover variants
# (heat; static and heat from the calibration profile: TIERS_VARIANTS) and the 24 GiB card once
# more with half the rest of the experts on the SSD (TIERS_SSD_CARD), so the container is
# written to WORK on the machine's disk (not a tmpfs: O_DIRECT reads must reach the drive). The first three layers are hash-routed (as in V4), so
# 3 of 6 carry the router-bias skew; the hash layers' skew comes from the Zipf token stream.
# Then the Belady gap: aff-run records a route trace of a tiered run at the 24 GiB card's slab
# and aff-trace replay --policy all replays it (~20 s more); the run's share of expert reads
# served from HBM (the slab's and the decode prefetch's) is held to Belady's slab hit rate, and
# again for each --expert-prefetch in PREFETCH_SHARES (default "2"; the same forced tokens, so
# the same routing; ~25 s each).
# CARDS (default "24 32 64") picks the cards; TIERS_VARIANTS may carry ":pfN" suffixes (the
# decode prefetch at N experts a layer, tiers_bench.cpp), e.g. the prefetch's own comparison:
#   CARDS="24 32" TIERS_SSD_CARD= TIERS_VARIANTS=static+profile:pf0,static+profile,static+profile:pf2,heat+profile:pf0,heat+profile
# usage: tests/bench/tiers_scenarios.sh BIN OUT   (BIN: portable build tree with tests/tiers_bench,
#        tests/make_geometry_container, tools/aff-run)
set -uo pipefail
bin=$(cd "${1:?usage: tiers_scenarios.sh BIN OUT}" && pwd) || exit 2
out=${2:?usage: tiers_scenarios.sh BIN OUT}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
layers=${LAYERS:-6}
steps=${STEPS:-48}
warm=${WARM:-32}
work=${WORK:-/tmp/tiers_scenarios}
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
rc=0
start=$SECONDS
mkdir -p "$work"
note "WORK $work on $(df -T "$work" | awk 'NR==2 {print $2 " (" $1 ")"}')"
geo=$work/v4-${layers}l-skew.aff
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$summary" 2>&1
free -g | head -2 >>"$summary"
if ! timeout 90 "$bin/tests/make_geometry_container" "$geo" --layers "$layers" --route-skew v4flash >"$out/make.txt" 2>&1; then
  note "FAIL make_geometry_container --layers $layers --route-skew v4flash: $(tail -1 "$out/make.txt")"
  exit 1
fi
note "container: $(tail -1 "$out/make.txt") [$((SECONDS - start)) s]"
cards=${CARDS:-24 32 64}
# shellcheck disable=SC2086 # the cards are words
if timeout 400 "$bin/tests/tiers_bench" "$geo" "$steps" "$warm" $cards >"$out/tiers_bench.txt" 2>&1; then
  note "PASS tiers_bench ran [$((SECONDS - start)) s]"
else
  note "FAIL tiers_bench (status $?): $(tail -2 "$out/tiers_bench.txt")"
  rc=1
fi
grep -E '^(HBM|mapped|\[|figure)' "$out/tiers_bench.txt" >>"$summary"
sed -n '/^scenario/,/^figure/p' "$out/tiers_bench.txt" | tee -a "$summary"
# Every scenario printed its two batches with a finite ratio.
variants=$(echo "${TIERS_VARIANTS:-heat,static+profile,heat+profile}" | tr ',' '\n' | grep -c .)
ssd_rows=$([ -n "${TIERS_SSD_CARD-24}" ] && echo 1 || echo 0)
ncards=$(echo "$cards" | wc -w)
want=$((2 * (1 + ncards * variants + ssd_rows)))
rows=$(grep -cE '^\[[^]]*\] batch [14]: .* ratio [0-9.]+;' "$out/tiers_bench.txt")
if [ "$rows" -eq "$want" ]; then note "PASS $want scenario rows (resident, $cards GiB x $variants variants, SSD $ssd_rows, x batch 1, 4)"
else note "FAIL $rows of $want scenario rows"; rc=1; fi
grep -E '^O_DIRECT' "$out/tiers_bench.txt" >>"$summary"
# The Belady gap on this routing: aff-run on the 24 GiB card's slab (--gpu-expert-mib as the
# bench printed it), a 64-token prompt and 192 forced steps (ids skewed toward small ones: the
# product of two uniforms), its route trace (--route-trace, recorded on the GPU path), then
# aff-trace replay --policy all at the same slab with a pool for the rest: heat's hit rate
# against Belady's MIN on the same dispatches (goal: within 5 points), and the run's own.
mib=$(sed -n 's/^\[24 GiB\] slab = .*(--gpu-expert-mib \([0-9]*\)).*/\1/p' "$out/tiers_bench.txt" | head -1)
ids() { awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); for (i = 0; i < n; ++i) printf "%d%s", int(rand() * rand() * 129280), (i < n - 1 ? "," : "") }'; }
if [ -n "$mib" ]; then
  if timeout 120 "$bin/tools/aff-run" -m "$geo" --tokens "$(ids 64 11)" --force-tokens "$(ids 192 12)" --no-echo --ui plain \
      --gpu-expert-mib "$mib" --route-trace "$out/run.aft" >"$out/trace_run.out" 2>"$out/trace_run.err"; then
    note "PASS aff-run --gpu-expert-mib $mib --route-trace [$((SECONDS - start)) s]; $(grep '^aff-run: experts (' "$out/trace_run.err")"
    if timeout 60 "$bin/tools/aff-trace" replay "$out/run.aft" --gpu-mib "$mib" --host-mib 1048576 --policy all \
        >"$out/replay.txt" 2>&1; then
      note "PASS aff-trace replay --policy all --gpu-mib $mib:"
      tee -a "$summary" <"$out/replay.txt"
      belady=$(awk '$4 == "belady" { sub("%", "", $5); print $5 }' "$out/replay.txt")
      hbm_gap() {  # the run's log: its share of expert reads from HBM against Belady's slab
        local share
        share=$(grep -o '[0-9.]* % of expert reads from HBM' "$1" | awk '{print $1}')
        awk -v s="${share:-0}" -v b="${belady:-0}" -v l="$2" 'BEGIN { printf "%s: %.1f %% of expert reads from HBM (slab or prefetched) against Belady'"'"'s slab %.1f %%: %+.1f points (goal: within 5)\n", l, s, b, s - b }'
      }
      hbm_gap "$out/trace_run.err" "--expert-prefetch default (1)" | tee -a "$summary"
      for pf in ${PREFETCH_SHARES-2}; do
        if timeout 120 "$bin/tools/aff-run" -m "$geo" --tokens "$(ids 64 11)" --force-tokens "$(ids 192 12)" --no-echo \
            --ui plain --gpu-expert-mib "$mib" --expert-prefetch "$pf" >/dev/null 2>"$out/share_pf$pf.err"; then
          hbm_gap "$out/share_pf$pf.err" "--expert-prefetch $pf" | tee -a "$summary"
        else
          note "FAIL aff-run --expert-prefetch $pf: $(tail -1 "$out/share_pf$pf.err")"
          rc=1
        fi
      done
    else
      note "FAIL aff-trace replay: $(tail -1 "$out/replay.txt")"
      rc=1
    fi
  else
    note "FAIL aff-run --route-trace: $(tail -1 "$out/trace_run.err")"
    rc=1
  fi
else
  note "FAIL no --gpu-expert-mib for the 24 GiB card in the bench's output"
  rc=1
fi
rm -f "$geo"
note "tiers_scenarios.sh: $([ $rc = 0 ] && echo passed || echo FAILURES) in $((SECONDS - start)) s"
exit $rc
