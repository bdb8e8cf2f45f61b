#!/usr/bin/env bash
# Route traces of generations with MTP drafts on a GPU (issue 18 with issue 16's traces), with
# prebuilt portable binaries laid out as main_device_run.sh takes them (BIN/tools/aff-run,
# BIN/tools/aff-trace, BIN/tests/aff_gpu_tests; tests/gpu/configure_portable.sh). The GPU
# reports a call's routing inside the call (libaff/gpu/forward_routes.cpp) under the phase the
# host's generation loop gave it (libaff/runtime/route_phase.hpp), and each call of its MTP
# layer as a draft step of layer L, as the CPU does (GpuModel::mtp_forward), so the CPU's
# labelling must hold there too:
#   1. the device family mtp_routes (tests/gpu/mtp_routes_test.cpp: the GPU MTP layer's events,
#      ids and weights against the CPU reference's for the same tokens; drafting on both; the
#      tiered trunk's mover not seeing the MTP calls);
#   2. on tiny-trained with --gpus 1, --draft mtp --draft-max 1 and 3 and --route-trace, the
#      greedy output must be byte for byte the output with --draft off, and the trace must match
#      the run's acceptance line step by step (tests/oracle/check_draft_trace.py --expect-drafts:
#      verify steps = verify calls, 2 to k+1 tokens each, a replay after exactly the partly kept
#      ones re-running their first tokens, exactly k draft steps of layer L before each verify
#      step, the j-th ending with the verify step's j-th token one position before it, the kept
#      guesses averaging the line's mean; without a zstd command only aff-trace summary's counts,
#      at least k draft tokens a verify call, said on the line);
#   3. the same generation from a 4-token prompt (--tokens: every call on the fp32 GEMVs) with
#      --draft mtp --draft-max 3 on the GPU and on the CPU (--gpus 0): where both print the same
#      output and acceptance line (they drafted alike), the traces must agree as the independent
#      reader reads them (tests/gpu/compare_route_traces.py: every step's tokens, positions,
#      phases and layers equal, draft steps included; selections differing at most 2 %, the
#      exact path's bound); where the lines differ a near-tied draft went the other way, a NOTE
#      (the family of part 1 holds the ids to the CPU's at tie-free positions).
# One PASS/FAIL line per check into OUT's summary; exits 1 if a check failed. About 60 s on an H200.
# usage: tests/gpu/draft_route_trace_device.sh BIN OUT
set -uo pipefail
source "$(dirname "$0")/device_script.bash" "$@"
model=$repo/tests/data/models/tiny-trained
begin=$SECONDS
# 1. The device family.
gpu_family 300 mtp_routes
# 2. Traces of drafted generations against their acceptance lines.
run() {  # tag, flags...
  aff_run 60 "$1" -m "$model" -p 'def fibonacci(n):' -n 40 --temp 0 --gpus 1 --no-echo --ui plain "${@:2}"
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
    if verdict=$(python3 "$repo/tests/oracle/check_draft_trace.py" --expect-drafts "$out/k$k.aft" $k "$line" \
        "$bin/tools/aff-trace" 2>&1); then
      note "PASS k=$k trace against '$line': $verdict"
    else
      fail "k=$k trace against '$line': $verdict"
    fi
  done
fi
# 3. GPU against CPU on the GEMV path.
both() {  # tag, flags...
  aff_run 120 "$1" -m "$model" --tokens 0,1006,1005,1007 -n 40 --temp 0 --no-echo --ui plain --draft mtp --draft-max 3 "${@:2}"
}
if ! both gemv-gpu --gpus 1 --route-trace "$out/gemv-gpu.aft"; then
  fail "aff-run --tokens --gpus 1 --draft mtp --route-trace: $(tail -1 "$out/gemv-gpu.err")"
elif ! both gemv-cpu --gpus 0 --route-trace "$out/gemv-cpu.aft"; then
  fail "aff-run --tokens --gpus 0 --draft mtp --route-trace: $(tail -1 "$out/gemv-cpu.err")"
else
  gline=$(grep '^aff-run: drafts: [0-9]* verify calls' "$out/gemv-gpu.err")
  cline=$(grep '^aff-run: drafts: [0-9]* verify calls' "$out/gemv-cpu.err")
  if ! cmp -s "$out/gemv-gpu.out" "$out/gemv-cpu.out" || [ "$gline" != "$cline" ]; then
    note "NOTE GEMV path: GPU and CPU drafted otherwise ('$gline' vs '$cline'): traces not compared"
  elif verdict=$(python3 "$repo/tests/gpu/compare_route_traces.py" "$out/gemv-gpu.aft" "$out/gemv-cpu.aft" 0.02 \
      "$bin/tools/aff-trace" 2>&1); then
    note "PASS GEMV path, k=3, GPU vs CPU trace with draft steps ('$gline'): $verdict"
  else
    fail "GEMV path, k=3, GPU vs CPU trace with draft steps ('$gline'): $verdict"
  fi
  if verdict=$(python3 "$repo/tests/oracle/check_draft_trace.py" --expect-drafts "$out/gemv-gpu.aft" 3 "$gline" \
      "$bin/tools/aff-trace" 2>&1); then
    note "PASS GEMV path, k=3, GPU trace against '$gline': $verdict"
  else
    fail "GEMV path, k=3, GPU trace against '$gline': $verdict"
  fi
fi
note "draft_route_trace_device.sh: $((SECONDS - begin)) s, $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
