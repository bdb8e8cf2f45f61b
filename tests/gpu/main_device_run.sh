#!/usr/bin/env bash
# One device call that checks main on a GPU machine with prebuilt portable binaries
# (tests/gpu/configure_portable.sh; BIN is a copy of that build's tools/ and tests/ binaries laid
# out as the build tree: BIN/tools/aff-run, BIN/tests/aff_gpu_tests): every device test family
# (aff_gpu_tests, the sweep against DeepSeek's reference included), the embedded default model's
# greedy continuation on the GPU against the CPU's pinned one, and its quality rows on the GPU
# (tests/oracle/aff_quality.py --gpus 1). Writes a summary and the logs into OUT; exits non-zero if
# a check failed. (Decode speed: tests/bench/decode_bench.cpp on a geometry container.)
# usage: tests/gpu/main_device_run.sh BIN OUT [aff_gpu_tests family...]
set -uo pipefail
bin=$(cd "${1:?usage: main_device_run.sh BIN OUT [family...]}" && pwd)
out=${2:?usage: main_device_run.sh BIN OUT [family...]}
shift 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
export AFF_TEST_DATA=$repo/tests/data
rc=0
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$summary" 2>&1

# 1. Device tests.
start=$SECONDS
if timeout 380 "$bin/tests/aff_gpu_tests" "$@" >"$out/gpu_tests.txt" 2>&1; then t=ok; else t="FAILED ($?)"; rc=1; fi
note "aff_gpu_tests ${*:-(all)}: $t in $((SECONDS - start)) s; $(tail -1 "$out/gpu_tests.txt")"
grep 'FAIL$' "$out/gpu_tests.txt" | head -30 >>"$summary"

# 2. The embedded default model: greedy on the GPU, byte for byte the CPU's pinned continuation.
model=tests/data/models/tiny-trained.aff
want=tests/cli/aff-run/trained-greedy.sh.stdout.exact
if "$bin/tools/aff-run" -m "$model" -p 'def fibonacci(n):' -n 40 --temp 0 -q >"$out/trained_gpu.txt" 2>"$out/trained_gpu.err" &&
  cmp -s "$out/trained_gpu.txt" "$want"; then
  note "tiny-trained.aff greedy on the GPU: identical to the CPU's pinned continuation"
else
  note "tiny-trained.aff greedy on the GPU: DIFFERS from the CPU's pinned continuation (or failed)"
  rc=1
fi
head -3 "$out/trained_gpu.err" >>"$summary"

# 3. Its quality rows on the GPU (checkpoint and container).
if timeout 150 python3 tests/oracle/aff_quality.py tests/data/models/tiny-trained/results.json "$bin" \
  tests/data/models/tiny-trained "$model" --gpus 1 >"$out/quality_gpu.txt" 2>&1; then
  tail -8 "$out/quality_gpu.txt" >>"$summary"
else
  note "aff_quality.py --gpus 1: failed"; tail -5 "$out/quality_gpu.txt" >>"$summary"; rc=1
fi

exit $rc
