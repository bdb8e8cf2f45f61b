#!/usr/bin/env bash
# The main job that README's first command ends with, on the embedded default model.
# Until aff-run exists it is a container round trip on the committed fixture
# tests/data/tiny.aff: summarise it, then (once aff-split and aff-verify exist) split
# it into parts, check the SHA256SUMS and the parts' concatenation.
# usage: tests/main-job.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
fixture="$(cd "$(dirname "$0")" && pwd)/data/tiny.aff"
"$build/tools/aff-info" "$fixture"
