#!/usr/bin/env bash
# The main job that README's first command ends with, on the embedded default model.
# Until aff-run exists it is a container round trip on the committed fixture
# tests/data/tiny.aff: summarise it, split it into parts with a SHA256SUMS, check the
# sums, check the parts as a container without joining them, join them and check the
# result byte for byte and digest for digest.
# usage: tests/main-job.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
fixture="$(cd "$(dirname "$0")" && pwd)/data/tiny.aff"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tools=$build/tools

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
