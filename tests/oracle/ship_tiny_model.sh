#!/usr/bin/env bash
# Brings the model that train_tiny_model.sh left in a device call's OUT into the
# repository: DEST/NAME/ (the official-layout checkpoint, tokenizer.json, results.json,
# corpus_manifest.json, train_log.jsonl) and DEST/NAME.aff, made from it by aff-quantize
# on the CPU with a fixed creation time (so the bytes repeat). Then it checks the
# committed size against the 20 MB budget, runs aff-run greedily on checkpoint and
# container with the main job's prompt, compares the checkpoint's continuation with the
# one transformers computed on the same dequantised weights (results.json, when there),
# and writes the expected stdout of the CLI case that pins the container's continuation.
# usage: tests/oracle/ship_tiny_model.sh FROM_DIR BUILD_DIR
#   NAME=tiny-trained  DEST=tests/data/models  CASE=tests/cli/aff-run/trained-greedy.sh
#   (DEST and CASE may point elsewhere to try this on another model without touching
#   the repository)
set -euo pipefail
from=$(cd "${1:?usage: ship_tiny_model.sh FROM_DIR BUILD_DIR}" && pwd)
tools=$(cd "${2:?usage: ship_tiny_model.sh FROM_DIR BUILD_DIR}" && pwd)/tools
repo=$(cd "$(dirname "$0")/../.." && pwd)
name=${NAME:-tiny-trained}
dest=${DEST:-$repo/tests/data/models}
case_file=${CASE:-$repo/tests/cli/aff-run/trained-greedy.sh}
prompt='def fibonacci(n):'
n_tokens=40
budget=$((20 * 1000 * 1000))

for t in aff-quantize aff-run aff-info; do
  [ -x "$tools/$t" ] || { echo "ship_tiny_model: $tools/$t is missing (build it first)" >&2; exit 1; }
done
for f in config.json tokenizer.json; do
  [ -f "$from/$f" ] || { echo "ship_tiny_model: $from/$f is missing" >&2; exit 1; }
done
ls "$from"/*.safetensors >/dev/null 2>&1 || { echo "ship_tiny_model: no safetensors in $from" >&2; exit 1; }

mkdir -p "$dest"
tmp=$(mktemp -d "$dest/.ship-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/$name"
for f in "$from"/config.json "$from"/tokenizer.json "$from"/*.safetensors "$from"/model.safetensors.index.json \
  "$from"/results.json "$from"/corpus_manifest.json "$from"/train_log.jsonl; do
  [ -f "$f" ] && cp "$f" "$tmp/$name/"
done
SOURCE_DATE_EPOCH=1767225600 "$tools/aff-quantize" --src "$tmp/$name" --out "$tmp/$name.aff" --gpus 0 --progress never
"$tools/aff-info" "$tmp/$name.aff"

total=$(du -cb "$tmp/$name" "$tmp/$name.aff" | tail -1 | cut -f1)
echo "ship_tiny_model: checkpoint $(du -sb "$tmp/$name" | cut -f1) bytes, container $(stat -c %s "$tmp/$name.aff") bytes, total $total (budget $budget)"
[ "$total" -le "$budget" ] || { echo "ship_tiny_model: $total bytes is over the $budget-byte budget" >&2; exit 1; }

ids_of() { sed -n 's/^generated tokens://p' "$1" | tr -s ' ' | sed 's/^ //'; }
"$tools/aff-run" -m "$tmp/$name" -p "$prompt" -n $n_tokens --temp 0 --dump-tokens >"$tmp/ckpt.out" 2>"$tmp/ckpt.err"
"$tools/aff-run" -m "$tmp/$name.aff" -p "$prompt" -n $n_tokens --temp 0 --dump-tokens >"$tmp/aff.out" 2>"$tmp/aff.err"
echo "--- checkpoint, greedy:"; cat "$tmp/ckpt.out"
echo "--- container, greedy:"; cat "$tmp/aff.out"
if [ -f "$tmp/$name/results.json" ]; then
  python3 - "$tmp/$name/results.json" "$prompt" "$(ids_of "$tmp/ckpt.err")" "$(ids_of "$tmp/aff.err")" <<'EOF'
import json, sys
results, prompt, ckpt, aff = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
ref = next((s for s in results["greedy"] if s["prompt"] == prompt), None)
if ref is None:
    sys.exit(f"ship_tiny_model: results.json has no greedy sample for {prompt!r}")
want = [str(t) for t in ref["dequantised_ids"]]
def agree(a, b):
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"{n} of {min(len(a), len(b))} tokens agree"
print("ship_tiny_model: aff CPU on the checkpoint vs transformers on the dequantised weights:", agree(ckpt, want))
print("ship_tiny_model: aff CPU on the container vs the checkpoint:", agree(aff, ckpt))
EOF
else
  echo "ship_tiny_model: no results.json: no comparison with transformers"
fi

"$tools/aff-run" -m "$tmp/$name.aff" -p "$prompt" -n $n_tokens --temp 0 -q >"$tmp/case.stdout" 2>/dev/null
rm -rf "${dest:?}/$name" "$dest/$name.aff"
mv "$tmp/$name" "$dest/$name"
mv "$tmp/$name.aff" "$dest/$name.aff"
mkdir -p "$(dirname "$case_file")"
cp "$tmp/case.stdout" "$case_file.stdout.exact"
echo "ship_tiny_model: wrote $dest/$name, $dest/$name.aff and $case_file.stdout.exact"
