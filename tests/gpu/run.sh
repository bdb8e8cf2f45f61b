#!/usr/bin/env bash
# Device tests, on a machine with a GPU (not part of CI, which has none): configures and builds
# a GPU build, runs tests/gpu (every kernel against its CPU twin on fresh random data) and
# prints the pass/fail table; with --bench it then runs the GPU benchmarks
# (tests/bench/*_bench.hip), whose last lines are figure, bound and ratio.
# usage: tests/gpu/run.sh [--bench] [BUILD_DIR]          (default BUILD_DIR: build-gpu)
#   AFF_GPU=CUDA|HIP      backend to configure (default CUDA)
#   AFF_CMAKE_ARGS=...    extra cmake arguments (e.g. -DCMAKE_CUDA_ARCHITECTURES=90)
#   AFF_GPU_PREBUILT=1    BUILD_DIR already holds the binaries: skip configure and build
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
bench=0
if [ "${1:-}" = --bench ]; then bench=1; shift; fi
build=${1:-$src/build-gpu}

shopt -s nullglob
benches=()
for b in "$src"/tests/bench/*_bench.hip; do benches+=("$(basename "$b" .hip)"); done

if [ "${AFF_GPU_PREBUILT:-0}" != 1 ]; then
  # shellcheck disable=SC2086
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DAFF_GPU="${AFF_GPU:-CUDA}" ${AFF_CMAKE_ARGS:-}
  cmake --build "$build" -j "$(nproc)" --target aff_gpu_tests "${benches[@]}"
fi

rc=0
echo "== device tests: every kernel against its CPU twin"
"$build/tests/aff_gpu_tests" || rc=1
if [ $bench = 1 ]; then
  for b in "${benches[@]}"; do
    echo "== benchmark $b"
    "$build/tests/$b" || rc=1
  done
fi
[ $rc = 0 ] && echo "run.sh: all device tests passed" || echo "run.sh: FAILURES (see the table above)"
exit $rc
