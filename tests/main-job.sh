#!/usr/bin/env bash
# The main job that README's first command ends with, on the embedded default model.
# 1. A container round trip on the committed fixture tests/data/tiny.aff: summarise it,
#    split it into parts with a SHA256SUMS, check the sums, check the parts as a container
#    without joining them, join them and check the result byte for byte and digest for
#    digest.
# 2. Last, so that it is what a new user sees at the end of ./setup.sh: generation with aff-run
#    from the embedded default model, tests/data/models/tiny-trained.aff:
#    a tiny DeepSeek-V4 (4 layers, 16 experts, vocabulary 2048, an MTP layer) trained on Python
#    sources and docs by tests/oracle/train_tiny_model.sh and quantised by aff-quantize; greedy
#    from a fixed prompt, so the text is the same on every machine (tests/cli/aff-run pins it).
# usage: tests/main-job.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
fixture="$(cd "$(dirname "$0")" && pwd)/data/tiny.aff"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tools=$build/tools

source_dir="$(cd "$(dirname "$0")/.." && pwd)"
"$tools/aff-info" "$fixture"
cp "$fixture" "$work/tiny.aff"
cd "$work"
"$tools/aff-split" --max-size 8KiB tiny.aff
mkdir joined
mv tiny.aff joined/original.aff
"$tools/aff-verify" -c SHA256SUMS --ignore-missing
"$tools/aff-verify" --parts tiny.aff.part-00001-of-00003
cat tiny.aff.part-* > joined/tiny.aff
cmp joined/original.aff joined/tiny.aff
"$tools/aff-verify" joined/tiny.aff
echo "main job: container round trip OK"

"$tools/aff-run" -m "$source_dir/tests/data/models/tiny-trained.aff" -p 'def fibonacci(n):' -n 40 --temp 0
echo
echo "main job: generation OK"

