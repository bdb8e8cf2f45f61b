#!/usr/bin/env python3
# Builds the text corpus the tiny trained DeepSeek-V4 model learns from, from what the
# machine running it has on its own disk (the device machine has no network): the Python
# standard library's sources (PSF licence), the Python sources and docs of the installed
# distributions whose metadata names a permissive licence (MIT, BSD, Apache, PSF, ISC,
# zlib, public domain, ...), and the texts under /usr/share/doc of Debian packages whose
# machine-readable copyright file names only permissive licences. Anything else (GPL
# family, MPL, proprietary, unknown) is left out and listed as such in the manifest.
# A share of chat-formatted samples is made from docstrings (user asks what a function
# or class does, the assistant answers with the docstring's first paragraph), rendered
# with DeepSeek-V4's chat strings (model doc 6) so that replies learn the turn structure.
# Standard library only, deterministic: sorted file lists, a seeded shuffle, and a
# held-out split decided by a hash of each file's name (independent of what else is on
# the disk). Output in OUT_DIR:
#   train.jsonl, heldout.jsonl  one {"text", "kind": code|doc|chat, "src"} per line;
#                               chat texts carry their own BOS/EOS, the others get them
#                               when tokenised (train_tokenizer.py)
#   manifest.json               the sources used (licence, version, files, bytes per split)
#                               and every source left out with its licence verdict
# usage: build_corpus.py OUT_DIR [--max-mb 160] [--chat-share 0.08] [--seed 23] [--smoke]
import argparse, ast, gzip, hashlib, importlib.metadata, json, multiprocessing, os, random, re, sys, sysconfig, time

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SPECIALS = (BOS, EOS, USER, ASSISTANT, THINK_OPEN, THINK_CLOSE, "｜DSML｜", "<｜latest_reminder｜>", "<｜▁pad▁｜>")

PERMISSIVE = re.compile(r"\b(mit|expat|bsd|0bsd|apache|psf|python software foundation|python-2\.0|isc|zlib|unlicense|"
                        r"public[ -]domain|cc0|hpnd|x11|bsl-1\.0|boost)\b")
COPYLEFT_OR_UNFREE = re.compile(r"(gpl|\bmpl\b|mozilla|\bepl\b|eclipse|cddl|proprietary|commercial|non-commercial|"
                                r"\bcc-by-nc|\bsspl|\bbusl|artistic)")
DOC_SUFFIXES = (".md", ".rst", ".txt")
MIN_BYTES, MAX_BYTES = 200, 1 << 20


def licence_verdict(text):
    """'permissive' only when the licence text names a permissive licence and nothing
    copyleft or unfree; 'excluded' for a copyleft/unfree one; 'unknown' otherwise."""
    t = (text or "").lower()
    if COPYLEFT_OR_UNFREE.search(t):
        return "excluded"
    return "permissive" if PERMISSIVE.search(t) else "unknown"


def dist_licence(meta):
    parts = []
    if meta.get("License-Expression"):
        parts.append(meta["License-Expression"])
    lic = meta.get("License") or ""
    if lic and len(lic) <= 200 and lic.strip().upper() != "UNKNOWN":  # long fields hold whole licence texts
        parts.append(lic.strip())
    parts += [c.split("::")[-1].strip() for c in (meta.get_all("Classifier") or []) if c.startswith("License ::")]
    return "; ".join(dict.fromkeys(p for p in parts if p))


def debian_licences(copyright_path):
    """License ids named in a machine-readable (DEP-5) debian/copyright, or None when the
    file is free text (then nothing from the package is used)."""
    try:
        with open(copyright_path, encoding="utf-8", errors="replace") as f:
            text = f.read(200000)
    except OSError:
        return None
    if not text.startswith("Format:") or "copyright-format" not in text.split("\n", 1)[0]:
        return None
    ids = set()
    for line in text.splitlines():
        if line.startswith("License:"):
            expr = line[len("License:"):].strip()
            if expr:
                ids.add(expr)
    return sorted(ids)


def debian_verdict(ids):
    # "A or B": permissive when one alternative is; "A and B" / separate paragraphs: all must be.
    for expr in ids:
        alternatives = re.split(r"\s+or\s+", expr.lower())
        if not any(all(licence_verdict(x) == "permissive" for x in re.split(r"\s+and\s+|,", alt) if x.strip())
                   for alt in alternatives):
            return "excluded" if any(licence_verdict(a) == "excluded" for a in alternatives) else "unknown"
    return "permissive" if ids else "unknown"


def module_name(rel):
    parts = rel[:-3].split("/") if rel.endswith(".py") else rel.split("/")
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


SECTION = re.compile(r"^(args|arguments|parameters|params|returns?|raises|yields?|examples?|notes?|attributes|"
                     r"see also|warnings?|references|keyword arguments|other parameters)\s*:?\s*$", re.I)


def first_paragraph(doc):
    """The docstring's opening paragraph: up to a blank line, a section heading (Google
    or numpy style), a field list, a doctest or a directive."""
    lines = doc.strip().splitlines()
    out = []
    for i, line in enumerate(lines):
        s = line.strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if not s or SECTION.match(s) or s.startswith((":param", ":return", ":raises", ":type", ">>>", "..")) or \
                (nxt and set(nxt) <= set("-=~") and len(nxt) >= 3):
            break
        out.append(s)
    return " ".join(" ".join(out).split())


def docstring_pairs(text, module):
    """(qualified name, kind, signature, first docstring paragraph) for the public
    module-level functions and classes and the public methods of public classes."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    def visit(node, prefix, depth):
        for n in node.body:
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or n.name.startswith("_"):
                continue
            doc = ast.get_docstring(n)
            kind = "class" if isinstance(n, ast.ClassDef) else ("method" if depth else "function")
            sig = ""
            if not isinstance(n, ast.ClassDef):
                try:
                    sig = f"{n.name}({ast.unparse(n.args)})"
                except Exception:
                    sig = ""
            if doc:
                para = first_paragraph(doc)
                if 20 <= len(para) <= 600 and not any(s in para for s in SPECIALS):
                    out.append((f"{prefix}{n.name}", kind, sig, para))
            if isinstance(n, ast.ClassDef) and depth == 0:
                visit(n, f"{prefix}{n.name}.", 1)
    visit(tree, module + "." if module else "", 0)
    return out


def load_file(job):
    """Reads and filters one file (runs in a worker). Returns None when it is not used."""
    path, rel, kind = job
    try:
        size = os.path.getsize(path)
        if not MIN_BYTES <= size <= MAX_BYTES * 4:
            return None
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
        else:
            with open(path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
        if not MIN_BYTES <= len(raw) <= MAX_BYTES or b"\x00" in raw:
            return None
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return None
    lines = text.splitlines()
    if not lines or max(len(l) for l in lines) > 2000 or sum(len(l) > 300 for l in lines) > len(lines) // 100:
        return None  # generated tables, minified data
    if any(s in text for s in SPECIALS):
        return None  # the chat markers must only ever appear as markup
    text = text.replace("\r\n", "\n")
    pairs = docstring_pairs(text, module_name(rel)) if kind == "code" else []
    return text, hashlib.sha256(raw).hexdigest(), pairs


def is_heldout(src, rel, permille):
    h = int.from_bytes(hashlib.sha256(f"{src}\0{rel}".encode()).digest()[:8], "little")
    return h % 1000 < permille


def sources(smoke):
    """(name, version, licence text, verdict, root, [(path, rel, kind)]) for every source."""
    out = []
    paths = sysconfig.get_paths()
    stdlib = os.path.realpath(paths["stdlib"])
    site_dirs = {os.path.realpath(paths[k]) for k in ("purelib", "platlib") if paths.get(k)}
    skip_dirs = {"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test", "lib2to3"}
    files = []
    for root, dirs, names in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs and os.path.realpath(os.path.join(root, d)) not in site_dirs)
        for n in sorted(names):
            if n.endswith(".py"):
                p = os.path.join(root, n)
                files.append((p, os.path.relpath(p, stdlib).replace(os.sep, "/"), "code"))
    out.append(("python-stdlib", sys.version.split()[0], "PSF-2.0 (Python Software Foundation License)",
                "permissive", stdlib, files))

    seen = set()
    dists = sorted(importlib.metadata.distributions(),
                   key=lambda d: ((d.metadata.get("Name") or "").lower(), d.version or ""))
    for d in dists:
        name = (d.metadata.get("Name") or "").strip()
        key = re.sub(r"[-_.]+", "-", name.lower())
        if not name or key in seen:
            continue
        seen.add(key)
        lic = dist_licence(d.metadata)
        verdict = licence_verdict(lic)
        root = str(d.locate_file(""))
        files = []
        if verdict == "permissive":
            for f in sorted(d.files or [], key=str):
                rel = str(f).replace(os.sep, "/")
                if rel.startswith("..") or ".dist-info/" in rel or ".egg-info/" in rel or "__pycache__" in rel:
                    continue
                base = rel.rsplit("/", 1)[-1].lower()
                if rel.endswith(".py"):
                    kind = "code"
                elif rel.endswith(DOC_SUFFIXES) and not base.startswith(("license", "copying", "notice", "authors")):
                    kind = "doc"
                else:
                    continue
                p = str(d.locate_file(f))
                if os.path.isfile(p):
                    files.append((p, rel, kind))
        out.append((name, d.version, lic, verdict, root, files))

    doc_root = "/usr/share/doc"
    if os.path.isdir(doc_root):
        for pkg in sorted(os.listdir(doc_root)):
            base = os.path.join(doc_root, pkg)
            if not os.path.isdir(base) or os.path.islink(base):
                continue
            ids = debian_licences(os.path.join(base, "copyright"))
            verdict = debian_verdict(ids) if ids is not None else "unknown"
            files = []
            if verdict == "permissive":
                for root, dirs, names in os.walk(base):
                    dirs.sort()
                    for n in sorted(names):
                        low = n.lower()
                        if low.startswith(("changelog", "copyright", "license", "copying")):
                            continue
                        stem = low[:-3] if low.endswith(".gz") else low
                        if stem.startswith(("readme", "news", "faq", "todo")) or stem.endswith(DOC_SUFFIXES):
                            p = os.path.join(root, n)
                            if os.path.isfile(p) and not os.path.islink(p):
                                files.append((p, os.path.relpath(p, base).replace(os.sep, "/"), "doc"))
            out.append((f"debian:{pkg}", "", "; ".join(ids or []) or "(no machine-readable copyright)", verdict, base, files))
    if smoke:  # a few sources, a few files each: the pipeline, not the data
        out = [s[:5] + (s[5][:40],) for s in out if s[3] == "permissive"][:6] + [s for s in out if s[3] != "permissive"]
    assert out[0][0] == "python-stdlib"  # main() takes the first source whole
    return out


def water_fill(sizes, total):
    """The per-source cap c with sum(min(size, c)) == total (all of it when it fits)."""
    if sum(sizes) <= total:
        return max(sizes, default=0)
    lo, hi = 0, max(sizes)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sum(min(s, mid) for s in sizes) > total:
            hi = mid
        else:
            lo = mid
    return lo


QUESTIONS = ("What does `{q}` do?", "Explain what `{q}` is for.", "What is `{q}`?", "Describe the {kind} `{q}`.",
             "What is `{q}` used for in `{module}`?")


def chat_sample(turns, rng):
    """One conversation in DeepSeek-V4's encoding (model doc 6.2/6.3): BOS, an optional
    system text, user turns each followed by the assistant prefix; the last turn is in
    thinking mode for about a quarter of the samples (earlier turns then look like
    non-thinking turns, as drop_thinking renders them)."""
    text = BOS
    if rng.random() < 0.3:
        text += rng.choice(("You are a helpful assistant.", "You are a Python expert. Answer briefly.",
                            "Answer questions about Python code."))
    thinking = rng.random() < 0.25
    for i, (q, kind, sig, para) in enumerate(turns):
        module = q.rsplit(".", 1)[0] if "." in q else "builtins"
        if sig and rng.random() < 0.2:
            question = f"What is the signature of `{q}`?"
            answer = f"`{sig}`. {para}"
        else:
            question = rng.choice(QUESTIONS).format(q=q, kind=kind, module=module)
            answer = para
        text += USER + question + ASSISTANT
        if thinking and i == len(turns) - 1:
            reason = f"`{q}` is a {kind} defined in `{module}`."
            if sig:
                reason += f" Its signature is `{sig}`."
            text += THINK_OPEN + reason + THINK_CLOSE
        else:
            text += THINK_CLOSE
        text += answer + EOS
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--max-mb", type=float, default=160.0, help="plain text budget (chat samples come on top)")
    ap.add_argument("--chat-share", type=float, default=0.08, help="chat samples as a share of the plain text bytes")
    ap.add_argument("--heldout-permille", type=int, default=10)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:  # small, and a held-out share large enough to hold an evaluation window
        a.max_mb = min(a.max_mb, 2.0)
        a.heldout_permille = max(a.heldout_permille, 100)
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    srcs = sources(a.smoke)
    rng = random.Random(a.seed)
    jobs, owner = [], []
    for si, s in enumerate(srcs):
        files = list(s[5])
        rng.shuffle(files)  # so a capped source contributes from all its subpackages
        jobs += files
        owner += [si] * len(files)
    print(f"build_corpus: {len(srcs)} sources, {sum(1 for s in srcs if s[3] == 'permissive')} permissive, "
          f"{len(jobs)} candidate files", flush=True)
    with multiprocessing.Pool(min(16, os.cpu_count() or 1)) as pool:
        loaded = pool.map(load_file, jobs, chunksize=64)
    per_src = [[] for _ in srcs]
    seen_digests = set()
    for (path, rel, kind), si, res in zip(jobs, owner, loaded):
        if res is None or res[1] in seen_digests:
            continue
        seen_digests.add(res[1])
        per_src[si].append((rel, kind, res[0], res[2]))
    # The standard library is taken whole; the other sources share the rest of the budget
    # under one per-source cap, so no single package dominates.
    sizes = [sum(len(t.encode()) for _, _, t, _ in docs) for docs in per_src]
    cap = water_fill(sizes[1:], max(0, int(a.max_mb * 1e6) - sizes[0]))
    train, heldout, pairs_train, pairs_heldout, manifest = [], [], [], [], []
    for s, docs in zip(srcs, per_src):
        name, version, lic, verdict, _, files = s
        used = {"train_files": 0, "heldout_files": 0, "train_bytes": 0, "heldout_bytes": 0}
        budget = cap if s is not srcs[0] else sizes[0]
        for rel, kind, text, pairs in docs:
            n = len(text.encode())
            if n > budget:
                continue
            budget -= n
            held = is_heldout(name, rel, a.heldout_permille)
            (heldout if held else train).append({"text": text, "kind": kind, "src": name})
            (pairs_heldout if held else pairs_train).extend(pairs)
            used["heldout_files" if held else "train_files"] += 1
            used["heldout_bytes" if held else "train_bytes"] += n
        where = "stdlib" if s is srcs[0] else ("/usr/share/doc" if name.startswith("debian:") else "site-packages")
        manifest.append(dict(source=name, version=version, licence=lic, verdict=verdict, where=where,
                             candidate_files=len(files), **used))
    # Chat samples: docstring pairs grouped into conversations of one to three turns.
    def make_chats(pairs, budget):
        pairs = sorted(set(pairs))
        rng.shuffle(pairs)
        out, used, i = [], 0, 0
        while i < len(pairs) and used < budget:
            k = rng.choice((1, 1, 2, 3))
            text = chat_sample(pairs[i:i + k], rng)
            i += k
            used += len(text.encode())
            out.append({"text": text, "kind": "chat", "src": "docstrings"})
        return out, i
    plain_train = sum(m["train_bytes"] for m in manifest)
    plain_held = sum(m["heldout_bytes"] for m in manifest)
    chats_train, n_pairs_train = make_chats(pairs_train, a.chat_share * plain_train)
    chats_held, n_pairs_held = make_chats(pairs_heldout, a.chat_share * plain_held)
    train += chats_train
    heldout += chats_held
    rng.shuffle(train)
    rng.shuffle(heldout)
    for fname, docs in (("train.jsonl", train), ("heldout.jsonl", heldout)):
        tmp = os.path.join(a.out, fname + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        os.replace(tmp, os.path.join(a.out, fname))
    if not train or not heldout:
        raise SystemExit(f"build_corpus: empty split (train {len(train)} documents, held-out {len(heldout)})")
    summary = dict(
        seed=a.seed, smoke=a.smoke, python=sys.version.split()[0], max_mb=a.max_mb, per_source_cap_bytes=cap,
        heldout_permille=a.heldout_permille, chat_share=a.chat_share,
        train_documents=len(train), heldout_documents=len(heldout),
        train_bytes=sum(len(d["text"].encode()) for d in train), heldout_bytes=sum(len(d["text"].encode()) for d in heldout),
        chat_samples_train=len(chats_train), chat_samples_heldout=len(chats_held),
        docstring_pairs_used_train=n_pairs_train, docstring_pairs_used_heldout=n_pairs_held,
        bytes_by_kind={k: sum(len(d["text"].encode()) for d in train + heldout if d["kind"] == k) for k in ("code", "doc", "chat")},
        by_licence_verdict={v: sum(1 for m in manifest if m["verdict"] == v) for v in ("permissive", "excluded", "unknown")},
        seconds=round(time.time() - t0, 1))
    used_sources = [m for m in manifest if m["train_files"] + m["heldout_files"]]
    not_used = [[m["source"], m["verdict"], m["licence"][:100]] for m in manifest
                if not m["train_files"] + m["heldout_files"]]
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump({"summary": summary, "sources": used_sources, "not_used": not_used}, f, indent=1, ensure_ascii=False)
    print("build_corpus:", json.dumps(summary), flush=True)
    used = sorted((m for m in manifest if m["train_bytes"] + m["heldout_bytes"]), key=lambda m: -m["train_bytes"])
    for m in used[:15]:
        print(f"  {m['source']:32s} {m['version']:12s} {m['train_bytes'] / 1e6:7.2f} MB  {m['licence'][:60]}")


if __name__ == "__main__":
    main()
