#!/usr/bin/env python3
"""aff-serve --route-trace end to end (route_trace_device.sh): one server on MODEL with
--route-trace TRACE, no prefix cache (so every prompt token runs) and no drafts (so every
generated token but the last runs once, as decode), one completion at
temperature 0, then the server is stopped and TRACE read by the independent reader of
tests/oracle/read_route_trace.py. Passes when the trace holds the request as one sequence:
every position from 0 to prompt + completion - 2 (the last generated token is never run)
exactly once, the prompt's as prefill and the rest as decode, every step with every layer.
Prints the reply and one PASS/FAIL line. Needs only python3; run it from a scratch directory.
The reader decodes zstd chunks with the `zstd` command; where there is none and AFF_TRACE (the
aff-trace binary) is given, `aff-trace summary --json` is read instead (tokens per phase, one
sequence, the step count not checked) and the line says so.

usage: route_trace_serve.py AFF_SERVE MODEL GPUS TRACE [AFF_TRACE]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
from read_route_trace import Reject, read_trace  # noqa: E402

PROMPT = "def fibonacci(n):"


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit("usage: route_trace_serve.py AFF_SERVE MODEL GPUS TRACE [AFF_TRACE]")
    serve, model, gpus, trace = sys.argv[1:5]
    log = open(trace + ".log", "w+")
    p = subprocess.Popen([serve, "--port", "0", "-m", model, "--threads", "2", "--max-tokens-floor", "0",
                          "--prefix-cache-mib", "0", "--draft", "off", "--route-trace", trace, "--gpus", gpus, "--ui", "plain"],
                         stderr=log)
    try:
        base = None
        for _ in range(600):
            text = open(log.name).read()
            if "ready:" in text:
                base = "http://127.0.0.1:" + re.search(r"listening on http://[^ ]*:(\d+)", text).group(1)
                break
            if p.poll() is not None:
                print("FAIL the server exited: " + text.strip().splitlines()[-1] if text.strip() else "FAIL no output")
                return 1
            time.sleep(0.1)
        if base is None:
            print("FAIL the server was not ready in 60 s")
            return 1
        req = urllib.request.Request(base + "/v1/completions", json.dumps(
            {"prompt": PROMPT, "max_tokens": 8, "temperature": 0}).encode(), {"Content-Type": "application/json"})
        r = json.load(urllib.request.urlopen(req, timeout=60))
    finally:
        p.terminate()
        p.wait()
    prompt, completion = r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"]
    print(f"reply {r['choices'][0]['text']!r}: {prompt} prompt tokens, {completion} generated")
    want = prompt + completion - 1
    if shutil.which("zstd") is None and len(sys.argv) == 6:
        s = json.loads(subprocess.run([sys.argv[5], "summary", "--json", trace], capture_output=True, check=True).stdout)
        got = (s["sequences"], s["token_steps"], s["phases"]["prefill"]["tokens"], s["phases"]["decode"]["tokens"])
        ok = got == (1, want, prompt, want - prompt)
        print(f"{'PASS' if ok else 'FAIL'} (aff-trace summary: no zstd command for the independent reader) "
              f"sequences, tokens, prefill, decode {got}, want {(1, want, prompt, want - prompt)}")
        return 0 if ok else 1
    try:
        with open(trace, "rb") as f:
            h, steps = read_trace(f.read())
    except (Reject, OSError) as e:
        print(f"FAIL {trace}: {e}")
        return 1
    seen, bad = {}, 0
    for toks, blocks in steps:
        bad += [layer for layer, _ in blocks] != list(range(h["layers"]))
        for _tok, seq, pos, phase in toks:
            seen[pos] = seen.get(pos, 0) + 1
            bad += seq != 0 or phase != (0 if pos < prompt else 1)
    ok = bad == 0 and sorted(seen) == list(range(want)) and all(v == 1 for v in seen.values())
    print(f"{'PASS' if ok else 'FAIL'} {len(steps)} steps, {sum(seen.values())} tokens recorded (want {want}, "
          f"positions 0..{want - 1} once each), {bad} records not as run")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
