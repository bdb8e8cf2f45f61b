#!/usr/bin/env python3
# Trains the byte-level BPE tokenizer of the tiny trained DeepSeek-V4 model with Hugging
# Face `tokenizers`, in the one shape aff's tokenizer loader accepts (libaff/tokenizer:
# no normalizer, Split regexes then ByteLevel without its own regex, BPE without unk or
# byte fallback, ByteLevel decoder), and tokenises the corpus for training.
# DeepSeek-V4's chat markers (model doc 6.1) are added tokens inside the vocabulary, at
# the front so BOS = 0 and EOS = 1 as config.json says: BOS, EOS, pad, User, Assistant
# (special: hidden by decode(skip_special_tokens)), then <think>, </think>, ｜DSML｜ and
# <｜latest_reminder｜> (not special: clients and aff's chat parser read them as text).
# aff looks EOS and Assistant up by name (libaff/serve/model_engine.cpp); the chat
# renderer writes every marker into the prompt text (libaff/tokenizer/dsv4_strings.hpp).
# Output in OUT_DIR: tokenizer.json, train.bin and heldout.bin (uint16 little-endian ids,
# each plain document as BOS + text + EOS, chat samples as rendered), tokenizer_stats.json.
# usage: train_tokenizer.py CORPUS_DIR OUT_DIR [--vocab 2048] [--sample-mb 48]
import argparse, array, json, os, sys, time

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
MARKERS = ["<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>"]
SPECIAL = [BOS, EOS, PAD, USER, ASSISTANT]
# Digits in runs of at most three; then words (letters, marks, underscores) with one
# leading non-letter, punctuation runs with their line breaks, whitespace (a run of
# spaces gives its last space to the next word, so indentation stays one piece).
SPLITS = [r"\p{N}{1,3}",
          r"[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}_]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def build(vocab_size, texts):
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in SPLITS] +
        [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=SPECIAL + MARKERS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def aff_shape(spec):
    """Makes the JSON exactly what aff loads, and checks it (any difference is a bug here,
    not something to work around in aff). The markers lose their special flag."""
    for t in spec["added_tokens"]:
        if t["content"] in MARKERS:
            t["special"] = False
    problems = []
    if spec.get("normalizer") is not None:
        problems.append("normalizer is set")
    pre = spec["pre_tokenizer"]
    steps = pre.get("pretokenizers", [])
    if pre.get("type") != "Sequence" or [s["type"] for s in steps] != ["Split"] * len(SPLITS) + ["ByteLevel"]:
        problems.append(f"pre_tokenizer is {json.dumps(pre)[:200]}")
    else:
        for s in steps[:-1]:
            if s.get("behavior") != "Isolated" or s.get("invert"):
                problems.append(f"split {s}")
        if steps[-1].get("add_prefix_space") or steps[-1].get("use_regex"):
            problems.append(f"ByteLevel step {steps[-1]}")
    m = spec["model"]
    if m.get("type") != "BPE" or m.get("unk_token") is not None or m.get("byte_fallback") or m.get("dropout") is not None:
        problems.append("model is not plain BPE")
    if (spec.get("decoder") or {}).get("type") != "ByteLevel":
        problems.append("decoder is not ByteLevel")
    for t in spec["added_tokens"]:
        if t.get("lstrip") or t.get("rstrip") or t.get("single_word") or t.get("normalized"):
            problems.append(f"added token flags {t}")
    if spec.get("truncation") is not None or spec.get("padding") is not None:
        problems.append("truncation/padding set")
    if problems:
        raise SystemExit("train_tokenizer: tokenizer.json is not in the shape aff loads: " + "; ".join(problems))
    return spec


def check(tok, vocab_size):
    want = {s: i for i, s in enumerate(SPECIAL + MARKERS)}
    for s, i in want.items():
        if tok.token_to_id(s) != i:
            raise SystemExit(f"train_tokenizer: {s!r} has id {tok.token_to_id(s)}, expected {i}")
    if tok.get_vocab_size(with_added_tokens=True) != vocab_size:
        raise SystemExit(f"train_tokenizer: vocabulary {tok.get_vocab_size(with_added_tokens=True)} != {vocab_size}")
    sample = (BOS + USER + "What does `os.path.join` do?" + ASSISTANT + "<think>x</think>Joins paths." + EOS +
              "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n  ünïcödé ✓ 12345")
    ids = tok.encode(sample).ids
    if tok.decode(ids, skip_special_tokens=False) != sample:
        raise SystemExit("train_tokenizer: decode(encode(sample)) differs from the sample")
    for s in SPECIAL + MARKERS:
        if tok.encode(s).ids != [want[s]]:
            raise SystemExit(f"train_tokenizer: {s!r} does not encode to its single id")
    return ids


def encode_split(tok, jsonl, out_path, batch=2000):
    ids = array.array("H")
    docs = tokens = nbytes = 0
    buf = []
    def flush():
        nonlocal tokens
        for (kind, _), enc in zip(buf, tok.encode_batch([t for _, t in buf], add_special_tokens=False)):
            if kind == "chat":
                ids.extend(enc.ids)  # carries its own BOS ... EOS
            else:
                ids.append(0)
                ids.extend(enc.ids)
                ids.append(1)
        buf.clear()
    for d in read_jsonl(jsonl):
        buf.append((d["kind"], d["text"]))
        docs += 1
        nbytes += len(d["text"].encode())
        if len(buf) >= batch:
            flush()
    flush()
    if sys.byteorder != "little":
        ids.byteswap()
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        ids.tofile(f)
    os.replace(tmp, out_path)
    return {"documents": docs, "bytes": nbytes, "tokens": len(ids), "bytes_per_token": round(nbytes / max(1, len(ids)), 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--sample-mb", type=float, default=48.0, help="training text for the BPE merges")
    a = ap.parse_args()
    if a.vocab > 65536:
        raise SystemExit("train_tokenizer: ids are stored as uint16; --vocab must be at most 65536")
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    def sample():
        left = a.sample_mb * 1e6
        for d in read_jsonl(os.path.join(a.corpus, "train.jsonl")):
            if left <= 0:
                return
            left -= len(d["text"].encode())
            text = d["text"]
            for marker in SPECIAL + MARKERS:  # added tokens: no merges are spent on their bytes
                text = text.replace(marker, "\n")
            yield text
    tok = build(a.vocab, sample())
    spec = aff_shape(json.loads(tok.to_str()))
    path = os.path.join(a.out, "tokenizer.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False, indent=None, separators=(",", ":"))
    os.replace(path + ".tmp", path)
    tok = Tokenizer.from_file(path)  # what is checked and used is what was written
    sample_ids = check(tok, a.vocab)
    t1 = time.time()
    print(f"train_tokenizer: vocabulary {a.vocab} trained in {t1 - t0:.1f} s; sample ids {sample_ids[:24]}", flush=True)
    stats = {"vocab": a.vocab, "splits": SPLITS, "special": SPECIAL, "markers": MARKERS,
             "train_seconds": round(t1 - t0, 1)}
    for split in ("train", "heldout"):
        stats[split] = encode_split(tok, os.path.join(a.corpus, split + ".jsonl"), os.path.join(a.out, split + ".bin"))
        print(f"train_tokenizer: {split}: {json.dumps(stats[split])}", flush=True)
    stats["encode_seconds"] = round(time.time() - t1, 1)
    with open(os.path.join(a.out, "tokenizer_stats.json"), "w") as f:
        json.dump(stats, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
