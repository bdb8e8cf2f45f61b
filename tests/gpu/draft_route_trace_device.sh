#!/usr/bin/env bash
# Route traces of generations with MTP drafts on a GPU (issue 18 with issue 16's traces), with
# prebuilt portable binaries laid out as main_device_run.sh takes them (BIN/tools/aff-run,
# BIN/tools/aff-trace; tests/gpu/configure_portable.sh). The GPU reports a call's routing
# inside the call (libaff/gpu/forward_routes.cpp) under the phase the host's generation loop
# gave it (libaff/runtime/route_phase.hpp), so the CPU's labelling must hold there too: on
# tiny-trained with --gpus 1, --draft mtp --draft-max 1 and 3 and --route-trace, the greedy
# output must be byte for byte the output with --draft off, and the trace must match the
# run's acceptance line step by step (tests/oracle/check_draft_trace.py: verify steps = verify
# calls, 2 to k+1 tokens each, a replay after exactly the partly kept ones re-running their
# first tokens, the kept guesses averaging the line's mean; the GPU's MTP layer reports no
# routing yet, so no draft steps are expected, but k before each verify step would pass;
# without a zstd command only aff-trace summary's counts, said on the line). One PASS/FAIL line per check into OUT's
# summary; exits 1 if a check failed. About 30 s on an H200.
# usage: tests/gpu/draft_route_trace_device.sh BIN OUT
set -uo pipefail
bin=$(cd "${1:?usage: draft_route_trace_device.sh BIN OUT}" && pwd) || exit 2
out=${2:?usage: draft_route_trace_device.sh BIN OUT}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
repo=$(cd "$(dirname "$0")/../.." && pwd)
export AFF_TEST_DATA=$repo/tests/data
model=$repo/tests/data/models/tiny-trained
rc=0
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
fail() { note "FAIL $*"; rc=1; }
begin=$SECONDS
run() {  # tag, flags...
  local tag=$1
  shift
  timeout 60 "$bin/tools/aff-run" -m "$model" -p 'def fibonacci(n):' -n 40 --temp 0 --gpus 1 --no-echo --ui plain "$@" \
    >"$out/$tag.out" 2>"$out/$tag.err"
}
if ! run plain --draft off; then
  fail "aff-run --gpus 1 --draft off: $(tail -1 "$out/plain.err")"
else
  for k in 1 3; do
    if ! run k$k --draft mtp --draft-max $k --route-trace "$out/k$k.aft"; then
      fail "aff-run --gpus 1 --draft mtp --draft-max $k --route-trace: $(tail -1 "$out/k$k.err")"
      continue
    fi
    if cmp -s "$out/plain.out" "$out/k$k.out"; then
      note "PASS k=$k: greedy output with drafts and a trace = without drafts"
    else
      fail "k=$k: greedy output with drafts and a trace differs from without drafts"
    fi
    line=$(grep '^aff-run: drafts: [0-9]* verify calls' "$out/k$k.err")
    if verdict=$(python3 "$repo/tests/oracle/check_draft_trace.py" "$out/k$k.aft" $k "$line" "$bin/tools/aff-trace" 2>&1); then
      note "PASS k=$k trace against '$line': $verdict"
    else
      fail "k=$k trace against '$line': $verdict"
    fi
  done
fi
note "draft_route_trace_device.sh: $((SECONDS - begin)) s, $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
