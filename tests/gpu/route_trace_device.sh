#!/usr/bin/env bash
# Route traces on the GPU (issue 16), with prebuilt portable binaries laid out as
# main_device_run.sh takes them (BIN/tests/aff_gpu_tests, BIN/tests/decode_bench,
# BIN/tests/make_geometry_container, BIN/tools/aff-run, aff-serve, aff-trace;
# tests/gpu/configure_portable.sh), in one go:
#   1. the device family route_trace (GPU trace = CPU trace on the fixtures, batched decode,
#      logits with and without recording, the tiered model; tests/gpu/route_trace_test.cpp);
#   2. aff-run --route-trace on the GPU and on the CPU (--gpus 0) for the same tokens, on
#      tiny-a, tiny-trained and tiny-trained.aff: a 4-token prompt (GEMV prefill: fp32
#      activations) and, on the two trained ones, a 40-token one (prefill GEMMs, activations
#      rounded to bf16), each with 12 forced decode steps. The traces must agree as the independent reader reads them
#      (tests/gpu/compare_route_traces.py: headers, every step's tokens, positions, phases and
#      layers equal; selections differing at most 2 % on the exact path, 10 % with the GEMMs),
#      aff-trace summary must read the GPU's, and the GPU's logits (--logits-out) must be
#      byte for byte those of the same run without --route-trace;
#   3. aff-serve --route-trace on the GPU: one completion round-trips through the reader
#      (tests/gpu/route_trace_serve.py), and the same request on the CPU records the same
#      tokens (compare_route_traces.py, 10 %);
#   4. the cost: decode_bench's trace mode on a fresh 4-layer real-geometry container
#      (make_geometry_container --layers 4, 11.2 GiB): 8 rounds each of batch 1 and 4, with and
#      without the recorder in turns; its figure/bound/ratio lines go into the summary (the
#      goal, ratio <= 1.02, is reported, not failed on: a speed figure, not a check).
# Writes the logs and a summary into OUT; exits 1 if a check failed. About 100 s on an H200.
# usage: tests/gpu/route_trace_device.sh BIN OUT
set -uo pipefail
source "$(dirname "$0")/device_script.bash" "$@"
models=$repo/tests/data/models
begin=$SECONDS
# The independent reader decodes the traces' zstd chunks with the zstd command; without one the
# comparisons fall back to aff-trace summary's counts (said on each line).
command -v zstd >/dev/null || note "NOTE no zstd command: traces are compared by aff-trace summary's counts only, selections not compared"

# 1. The device family.
gpu_family 200 route_trace

# 2. aff-run on the GPU and on the CPU.
start=$SECONDS
forced=$(seq -s, 20 31)
for model in tiny-a tiny-trained tiny-trained.aff; do
  for prompt_case in "gemv 1,2,3,4 0.02" "gemm $(seq -s, 40 79) 0.10"; do
    read -r kind prompt limit <<<"$prompt_case"
    # A random model's routing is near-uniform: with bf16 activations a flipped choice and what
    # it changes after it are too likely there for a bound; the GEMM case runs the trained model.
    [ "$model" = tiny-a ] && [ "$kind" = gemm ] && continue
    name=$model-$kind
    run() {  # tag, extra flags...
      aff_run 60 "$name.$1" -m "$models/$model" --tokens "$prompt" --force-tokens "$forced" --no-echo --ui plain "${@:2}"
    }
    if ! run gpu --gpus 1 --route-trace "$out/$name.gpu.aft" --logits-out "$out/$name.gpu.logits"; then
      fail "aff-run $name --route-trace on the GPU: $(tail -1 "$out/$name.gpu.err")"
      continue
    fi
    if ! run plain --gpus 1 --logits-out "$out/$name.plain.logits"; then
      fail "aff-run $name on the GPU without recording: $(tail -1 "$out/$name.plain.err")"
      continue
    fi
    # --logits-out runs the last forced token too: the CPU run makes the same calls.
    if ! run cpu --gpus 0 --route-trace "$out/$name.cpu.aft" --logits-out "$out/$name.cpu.logits"; then
      fail "aff-run $name --route-trace on the CPU: $(tail -1 "$out/$name.cpu.err")"
      continue
    fi
    if cmp -s "$out/$name.gpu.logits" "$out/$name.plain.logits"; then
      note "PASS aff-run $name: GPU logits with --route-trace identical to without"
    else
      fail "aff-run $name: GPU logits with --route-trace differ from without"
    fi
    if "$bin/tools/aff-trace" summary --json "$out/$name.gpu.aft" >"$out/$name.gpu.summary.json" 2>"$out/$name.summary.err"; then
      note "PASS aff-trace summary reads the GPU trace of $name"
    else
      fail "aff-trace summary of the GPU trace of $name: $(tail -1 "$out/$name.summary.err")"
    fi
    if verdict=$(python3 "$repo/tests/gpu/compare_route_traces.py" "$out/$name.gpu.aft" "$out/$name.cpu.aft" "$limit" \
        "$bin/tools/aff-trace" 2>&1); then
      note "PASS aff-run $name GPU vs CPU trace: $verdict"
    else
      fail "aff-run $name GPU vs CPU trace: $verdict"
    fi
  done
done
note "aff-run part: $((SECONDS - start)) s"

# 3. aff-serve on the GPU, then on the CPU.
start=$SECONDS
mkdir -p "$out/serve" && cd "$out/serve" || exit 2
for gpus in 1 0; do
  if timeout 90 python3 "$repo/tests/gpu/route_trace_serve.py" "$bin/tools/aff-serve" "$models/tiny-trained.aff" "$gpus" \
      "$out/serve/gpus$gpus.aft" "$bin/tools/aff-trace" >"$out/serve/gpus$gpus.txt" 2>&1; then
    note "PASS aff-serve --gpus $gpus --route-trace: $(tail -1 "$out/serve/gpus$gpus.txt")"
  else
    fail "aff-serve --gpus $gpus --route-trace: $(tail -2 "$out/serve/gpus$gpus.txt" | tr '\n' ' ')"
  fi
done
if verdict=$(python3 "$repo/tests/gpu/compare_route_traces.py" "$out/serve/gpus1.aft" "$out/serve/gpus0.aft" 0.10 \
    "$bin/tools/aff-trace" 2>&1); then
  note "PASS aff-serve GPU vs CPU trace: $verdict"
else
  fail "aff-serve GPU vs CPU trace: $verdict"
fi
cd "$repo" || exit 2
note "aff-serve part: $((SECONDS - start)) s"

# 4. The cost of recording.
start=$SECONDS
geo=$out/g4.aff
if timeout 120 "$bin/tests/make_geometry_container" "$geo" --layers 4 -q >"$out/geo.txt" 2>&1; then
  if timeout 150 "$bin/tests/decode_bench" "$geo" 24 1 trace >"$out/decode_bench_trace.txt" 2>&1; then
    grep -E '^route trace cost, batch [0-9]+:|^(figure|bound|ratio):' "$out/decode_bench_trace.txt" >>"$summary"
    grep -E '^(figure|bound|ratio):' "$out/decode_bench_trace.txt"
  else
    fail "decode_bench trace: $(tail -1 "$out/decode_bench_trace.txt")"
  fi
else
  fail "make_geometry_container --layers 4: $(tail -1 "$out/geo.txt")"
fi
rm -f "$geo"
note "cost part: $((SECONDS - start)) s"

note "route_trace_device.sh: $((SECONDS - begin)) s in all"
[ $rc = 0 ] && note "route_trace_device.sh: all passed" || note "route_trace_device.sh: FAILURES"
exit $rc
