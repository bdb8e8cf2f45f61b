#!/usr/bin/env bash
# include_walls.py must fail on a breach: a scratch tree where core includes ui (upwards), a
# header is included by a path that is not written from the root, and a kernel reaches into
# libaff. Each gets its line and the exit status is 1; the same tree without them passes.
set -euo pipefail
walls=$(cd "$(dirname "$0")" && pwd)/include_walls.py
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/libaff/core" "$t/libaff/ui" "$t/kernels" "$t/tools"
printf '#pragma once\n' > "$t/libaff/ui/view.hpp"
printf '#pragma once\n' > "$t/kernels/common.hpp"
printf '#include "libaff/core/error.hpp"\n' > "$t/libaff/ui/view.cpp"
printf '#pragma once\n' > "$t/libaff/core/error.hpp"
printf '#include "libaff/ui/view.hpp"\n' > "$t/tools/aff-x.cpp"
python3 "$walls" "$t" > "$t/clean.txt"
grep -qx 'ui -> core' "$t/clean.txt"
printf '#include "libaff/ui/view.hpp"\n#include "view.hpp"\n' > "$t/libaff/core/pool.cpp"
printf '#include "libaff/core/error.hpp"\n' > "$t/kernels/k.hip"
if python3 "$walls" "$t" > "$t/out.txt"; then echo "breaches passed"; cat "$t/out.txt"; exit 1; fi
grep -qF 'libaff/core/pool.cpp:1: core includes ui, which lies above it' "$t/out.txt"
grep -qF 'libaff/core/pool.cpp:2: "view.hpp" is not written from the repository root' "$t/out.txt"
grep -qF 'kernels/k.hip:1: a kernel includes "libaff/core/error.hpp" outside kernels/' "$t/out.txt"
[ "$(wc -l < "$t/out.txt")" = 3 ]
echo "include_walls_breach: 3 breaches found, clean tree passes"
