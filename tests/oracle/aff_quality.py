#!/usr/bin/env python3
# The quality table of the trained default model (issue 23): aff's perplexity on the same
# held-out windows that export_tiny.py scored with transformers, for each model given
# (the official-layout checkpoint directory and the .aff, on the CPU or a GPU), with
# KL(first model || this one) and top-1 agreement, next to transformers' bf16 and
# dequantised rows from results.json. aff-run writes every position's logits
# (--logits-out, formats/logits.md); this script only reads them. Standard library only.
# usage: aff_quality.py RESULTS_JSON BUILD_DIR MODEL [MODEL ...] [--windows N] [--gpus N]
import argparse, array, json, math, os, struct, subprocess, sys, tempfile


def read_logits(path):
    with open(path, "rb") as f:
        raw = f.read()
    magic, version, vocab, records, reserved = struct.unpack_from("<8sIIQQ", raw, 0)
    if magic != b"AFFLOGIT" or version != 1 or vocab == 0 or reserved != 0:
        raise SystemExit(f"aff_quality: {path}: not a version 1 logits file")
    size = 16 + 4 * vocab
    if len(raw) != 32 + records * size:
        raise SystemExit(f"aff_quality: {path}: {len(raw)} bytes, expected {32 + records * size}")
    rows = []
    for r in range(records):
        off = 32 + r * size
        row = array.array("f")
        row.frombytes(raw[off + 16:off + size])
        if sys.byteorder != "little":
            row.byteswap()
        rows.append(row)
    return rows


def log_softmax(row):
    m = max(row)
    lse = m + math.log(sum(math.exp(x - m) for x in row))
    return [x - lse for x in row]


def run_window(tools, model, window, gpus, tmp):
    out = os.path.join(tmp, "w.logits")
    cmd = [os.path.join(tools, "aff-run"), "-m", model, "--tokens", ",".join(map(str, window[:-1])), "-n", "0",
           "--logits-out", out, "-q", "--no-echo"]
    if gpus is not None:
        cmd += ["--gpus", str(gpus)]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"aff_quality: {' '.join(cmd[:3])} failed: {p.stderr.strip()[-400:]}")
    rows = read_logits(out)
    if len(rows) != len(window) - 1:
        raise SystemExit(f"aff_quality: {model}: {len(rows)} logits records for {len(window) - 1} positions")
    return [log_softmax(r) for r in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("build")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--windows", type=int, default=0, help="score only the first N windows (default: all, as transformers did)")
    ap.add_argument("--gpus", type=int, help="passed to aff-run (default: aff-run's own choice)")
    a = ap.parse_args()
    with open(a.results) as f:
        res = json.load(f)
    windows = res["eval_windows"][:a.windows] if a.windows else res["eval_windows"]
    tools = os.path.join(a.build, "tools")
    stats = {m: {"nll": 0.0, "hit": 0, "kl": 0.0, "agree": 0} for m in a.models}
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for wi, w in enumerate(windows):
            ref = None
            for m in a.models:
                lp = run_window(tools, m, w, a.gpus, tmp)
                s = stats[m]
                for p, row in enumerate(lp):
                    s["nll"] -= row[w[p + 1]]
                    s["hit"] += int(max(range(len(row)), key=row.__getitem__) == w[p + 1])
                if ref is None:
                    ref = lp
                else:
                    for rp, qp in zip(ref, lp):
                        s["kl"] += sum(math.exp(x) * (x - y) for x, y in zip(rp, qp))
                        s["agree"] += int(max(range(len(rp)), key=rp.__getitem__) == max(range(len(qp)), key=qp.__getitem__))
            n += len(w) - 1
            print(f"aff_quality: window {wi + 1}/{len(windows)}", file=sys.stderr, flush=True)
    h = res["heldout"]
    print(f"held-out: {len(windows)} windows of {len(windows[0]) - 1} scored tokens (transformers rows: "
          f"{h['windows']} windows, {h['scored_tokens']} tokens)\n")
    print("| model | perplexity | top-1 accuracy | KL(first ‖ this) | top-1 agreement with first |")
    print("|---|---|---|---|---|")
    for name, key in (("transformers, bf16", "bf16"), ("transformers, dequantised official layout", "dequantised_official")):
        print(f"| {name} | {h[key]['perplexity']:.4f} | {h[key]['top1_accuracy']:.4f} | "
              f"{'—' if key == 'bf16' else format(h['kl_bf16_to_dequantised'], '.6f')} | "
              f"{'—' if key == 'bf16' else format(h['top1_agreement_bf16_dequantised'], '.4f')} |")
    for i, m in enumerate(a.models):
        s = stats[m]
        kl = "—" if i == 0 else f"{s['kl'] / n:.6f}"
        agree = "—" if i == 0 else f"{s['agree'] / n:.4f}"
        print(f"| aff, {os.path.basename(m.rstrip('/'))} | {math.exp(s['nll'] / n):.4f} | {s['hit'] / n:.4f} | {kl} | {agree} |")


if __name__ == "__main__":
    main()
