# aff-serve's prefix cache on a GPU, end to end (tests/gpu/RESULTS.md records its runs): two
# servers on the tiny-a fixture with a byte-level tokenizer (as tests/cli/aff-serve's
# byte_tokenizer writes it), one with the cache and one with --prefix-cache-mib 0, hold the
# same two-turn chats at temperature 0. Passes when the second turn on the cached server took
# tokens from the cache and both servers wrote the same replies. Needs only python3 (the
# device machine has no node or curl); run it from a scratch directory.
# usage: python3 serve_smoke.py AFF_SERVE MODEL_DIR GPUS
import json, re, subprocess, sys, time, urllib.request
serve, model, gpus = sys.argv[1:4]

def byte_tokenizer(path):
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    vocab = {chr(c): b for b, c in zip(bs, cs)}
    json.dump({"added_tokens": [], "decoder": {"type": "ByteLevel"},
               "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
               "model": {"type": "BPE", "vocab": vocab, "merges": []}}, open(path, "w"))

tok = "tok.json"
byte_tokenizer(tok)
def start(extra):
    log = open(f"server{len(procs)}.log", "w+")
    p = subprocess.Popen([serve, "--port", "0", "-m", model, "--tokenizer", tok, "--threads", "2",
                          "--max-tokens-floor", "0", "--gpus", gpus] + extra, stderr=log)
    procs.append(p)
    for _ in range(600):
        text = open(log.name).read()
        if "ready:" in text:
            port = re.search(r"listening on http://[^ ]*:(\d+)", text).group(1)
            print(re.search(r"ready:.*", text).group(0))
            return f"http://127.0.0.1:{port}", log.name
        if p.poll() is not None: sys.exit("server died: " + text)
        time.sleep(0.1)
    sys.exit("not ready")
def ask(base, messages):
    req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(
        {"max_tokens": 12, "temperature": 0, "messages": messages}).encode(), {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))
procs = []
ok = True
try:
    cached, clog = start([])
    plain, plog = start(["--prefix-cache-mib", "0"])
    for q in ["hi there", "Tell me a story"]:
        res = {}
        for name, base in [("cached", cached), ("plain", plain)]:
            m = [{"role": "user", "content": q}]
            a = ask(base, m)
            m += [{"role": "assistant", "content": a["choices"][0]["message"]["content"] or ""},
                  {"role": "user", "content": "And then?"}]
            b = ask(base, m)
            res[name] = (a, b)
            for turn, r in (("1", a), ("2", b)):
                print(f"{name} q={q!r} turn {turn}: prompt={r['usage']['prompt_tokens']} cached="
                      f"{r['usage']['prompt_tokens_details']['cached_tokens']} reply={r['choices'][0]['message']['content']!r}")
        same = all(res["cached"][i]["choices"][0]["message"] == res["plain"][i]["choices"][0]["message"] for i in (0, 1))
        got = res["cached"][1]["usage"]["prompt_tokens_details"]["cached_tokens"]
        print(f"q={q!r}: replies identical: {same}; turn-2 cached_tokens {got}")
        ok = ok and same and got > 0 and res["plain"][1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    metrics = urllib.request.urlopen(cached + "/metrics").read().decode()
    print("\n".join(l for l in metrics.splitlines() if l.startswith("aff_prefix_cache_")))
finally:
    for p in procs: p.terminate()
    for p in procs: p.wait()
print("SMOKE", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
