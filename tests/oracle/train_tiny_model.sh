#!/usr/bin/env bash
# Trains aff's embedded default model, a tiny DeepSeek-V4 with every feature of the
# architecture on, from a seed, on one GPU with torch + transformers 5.17 + tokenizers and
# no network, and leaves in OUT what is committed under tests/data/models/tiny-trained:
#   config.json, model.safetensors (official quantised layout, with mtp.0.*),
#   tokenizer.json, results.json (held-out perplexities, KL, expert popularity, MTP
#   acceptance, greedy samples), corpus_manifest.json, train_log.jsonl, run_log.txt
# (at most 8 files: what a device call brings back). Steps, each skipped when its output
# is already in WORK (so a second call resumes): build_corpus.py, train_tokenizer.py,
# train_tiny.py (resumes from its checkpoint), export_tiny.py.
#
# usage: tests/oracle/train_tiny_model.sh OUT [--smoke | --prepare-only]
#   --smoke         everything end to end on a tiny corpus and a few small steps, twice
#                   for the training step (the second call resumes): under a minute
#   --prepare-only  corpus and tokenizer only (about 2-3 minutes); a later call trains
#   WORK=DIR        where corpus, token files and checkpoint live (default build-train/ in
#                   the repository, which the device machine keeps between calls)
#   TRAIN_ARGS=...  extra train_tiny.py arguments (e.g. "--steps 1800 --time-budget 500")
#   VOCAB=N         tokenizer (and model) vocabulary, default 2048; 1792 saves ~0.55 MB
#                   over checkpoint and .aff if the committed total ends up over budget
#
# Size budget (the committed total, checkpoint + .aff, stays under 20 MB):
#   vocabulary 2048, D 256, 4 layers (sliding, CSA, HCA, CSA; the first two hash-routed),
#   16 routed experts (top 4) + 1 shared, expert width 128, H 4 x 128, q rank 128,
#   o groups 2 x 64, indexer 4 x 128 (top 16), HCA ratio 16, window 64, one MTP layer.
#   Official layout, bytes:
#     embed + head  2 x 2048 x 256 x 2 (BF16)                         2,097,152
#     per layer     attention FP8 196,620 + mHC F32 196,824 + shared expert FP8 98,310
#                   + 16 routed experts FP4+E8M0 835,584 + router/norms ~10,000
#                                                                   ~1,337,000
#     extra         CSA compressor+indexer 600,580 (x2), HCA compressor 139,520,
#                   tid2eid I64 2048 x 4 x 8 = 65,536 (x2)
#     trunk         2,097,152 + 4 x 1,337,000 + 2 x 600,580 + 139,520 + 2 x 65,536
#                   + final norm/hyper head                         ~8,934,000
#     MTP layer     1,337,000 + e_proj/h_proj FP8 2 x 65,540 + norms + hyper head
#                                                                   ~1,486,000
#     model.safetensors                                             ~10.4 MB (budget 12)
#   The .aff keeps every tensor but the routed experts and mtp.*, and stores the experts
#   at 2.875 bits in 256-wide blocks (an expert 49,152 bytes instead of FP4's 52,224):
#   about 8.7 MB. Together about 19.2 MB (+ 2 x ~60 KB tokenizer.json).
#   Measured on this geometry (a 6-step model, vocabulary 2048): model.safetensors
#   10,487,234 bytes, the .aff 8,839,648; with tokenizer, config and a small results.json
#   19.46 MB, so about 19.7 MB with the full results.json, train log and manifest.
#   Parameters: 11.5 M (trunk 9.5 M, MTP layer 2.1 M; counted by train_tiny.py), about
#   4 M active per token: the 25 M-parameter size the issue measured would not fit the
#   budget, so this one is smaller and trains more steps in the same time.
# Time (H200), expected, not yet measured: corpus and tokenizer 2-3 min (--prepare-only);
#   training 420 s (--time-budget: the step count is planned from the speed of steps 10-30,
#   ~1800 steps of 64 x 512 = ~55 M tokens at the issue's 137 k tokens/s; a slower run is
#   stopped at --time-limit 480 s), export and evaluation ~1 min; so two device calls:
#   --prepare-only, then the training call, each well under the 10-minute limit.
set -euo pipefail
out=${1:?usage: train_tiny_model.sh OUT [--smoke | --prepare-only]}
mode=${2:-full}
case "$mode" in full | --smoke | --prepare-only) ;; *) echo "train_tiny_model: unknown option $mode" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=${WORK:-$repo/build-train}
smoke=()
if [ "$mode" = --smoke ]; then
  work=$work/smoke
  rm -rf "$work"
  smoke=(--smoke)
fi
mkdir -p "$work"
log=$out/run_log.txt
exec > >(tee -a "$log") 2>&1
step() { echo "== train_tiny_model: $* ($(date -u +%H:%M:%S))"; }

step "start, mode $mode, work $work"
"$python" -c 'import torch, transformers, tokenizers, numpy; print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))'

if [ ! -f "$work/corpus/manifest.json" ]; then
  step "1/4 corpus"
  "$python" "$here/build_corpus.py" "$work/corpus" "${smoke[@]}"
else
  step "1/4 corpus: kept from an earlier call"
fi

if [ ! -f "$work/data/tokenizer_stats.json" ]; then
  step "2/4 tokenizer and token files"
  "$python" "$here/train_tokenizer.py" "$work/corpus" "$work/data" --vocab "${VOCAB:-2048}"
else
  step "2/4 tokenizer: kept from an earlier call"
fi
if [ "$mode" = --prepare-only ]; then
  step "prepared; run again without --prepare-only to train"
  exit 0
fi

step "3/4 training"
# shellcheck disable=SC2086
if [ "$mode" = --smoke ]; then
  "$python" "$here/train_tiny.py" "$work/data" "$work/ckpt" --smoke --steps 6 --stop-after 3 ${TRAIN_ARGS:-}
  step "3/4 training: resuming from the smoke checkpoint"
  "$python" "$here/train_tiny.py" "$work/data" "$work/ckpt" --smoke --steps 6 ${TRAIN_ARGS:-}
else
  # A call that also had to build corpus and tokenizer (the machine was not kept since
  # --prepare-only) trains for less, so that the whole call stays under 10 minutes.
  limits=()
  if [ "$SECONDS" -gt 30 ] && [ -z "${TRAIN_ARGS:-}" ] && [ ! -f "$work/ckpt/state.pt" ]; then
    budget=$((420 - SECONDS)); [ "$budget" -lt 240 ] && budget=240
    limits=(--time-budget "$budget" --time-limit $((budget + 60)))
    step "3/4 training: preparation took ${SECONDS} s in this call, so the training budget is ${budget} s"
  fi
  "$python" "$here/train_tiny.py" "$work/data" "$work/ckpt" "${limits[@]}" ${TRAIN_ARGS:-}
fi

step "4/4 export and evaluation"
"$python" "$here/export_tiny.py" "$work/ckpt" "$work/data" "$out" --manifest "$work/corpus/manifest.json" "${smoke[@]}"
cp "$work/corpus/manifest.json" "$out/corpus_manifest.json"
cp "$work/ckpt/train_log.jsonl" "$out/train_log.jsonl"

step "done; OUT holds:"
ls -l "$out"
