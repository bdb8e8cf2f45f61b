#!/usr/bin/env python3
"""Kill test: runs aff-quantize or aff-split on a small input, sends SIGKILL, SIGINT or
SIGTERM at a random moment, and checks what is left: either nothing loadable or a
complete output that verifies. "Nothing half-written is ever loadable" (design.md),
held under interruption.

usage: kill_test.py TOOLS_DIR DATA_DIR SOURCE_DIR {aff-quantize|aff-split} RUNS [SEED]

Per run, in a fresh directory:
  aff-quantize: out.aff is absent, or aff-verify passes it (structure, digests and
    completeness against its config); nothing else is left beside the inputs (after a
    SIGKILL an unnamed temporary vanishes with the process; a named one is reported).
  aff-split: SHA256SUMS present means every part is there, `sha256sum -c` passes in
    the folder and the parts concatenate to the input; a complete set of parts without
    it concatenates to the input too; an incomplete set only after SIGKILL; after
    SIGINT or SIGTERM either the whole result or nothing.
  The exit status is 0 (the tool finished first), or 130 for SIGINT and 143 for SIGTERM
  (exited, not killed by the signal), or death by SIGKILL; death by SIGINT or SIGTERM
  only when nothing is left (the signal came before the handlers were installed).
Prints one line per failure and a summary with the counts per signal and outcome.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PART = re.compile(r"^(.+)\.part-(\d{5})-of-(\d{5})$")


def run_tool(argv, cwd, delay, sig):
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(delay)
    if p.poll() is None:
        p.send_signal(sig)
    _, err = p.communicate()
    return p.returncode, err.decode(errors="replace")


def status_ok(code, sig, outcome):
    expected = {signal.SIGKILL: -signal.SIGKILL, signal.SIGINT: 130, signal.SIGTERM: 143}[sig]
    # A signal that lands while the process is still starting, before its handlers are
    # installed, ends it by the signal; it has written nothing then.
    return code in (0, expected) or (code == -sig and outcome == "nothing")


def check_quantize(tools, work, code, sig, err):
    problems = []
    left = sorted(set(os.listdir(work)) - {"ck"})
    if "out.aff" in left:
        v = subprocess.run([f"{tools}/aff-verify", "--progress", "never", "out.aff"], cwd=work, capture_output=True)
        if v.returncode != 0:
            problems.append("out.aff is left and does not verify: " + v.stderr.decode(errors="replace").strip())
        left.remove("out.aff")
        outcome = "complete"
    else:
        outcome = "nothing"
        if code == 0:
            problems.append("exit 0 but no out.aff: " + err.strip())
    if left:
        problems.append("left behind: " + ", ".join(left))
    return outcome, problems


def check_split(tools, work, code, sig, err, data):
    problems = []
    out = os.path.join(work, "out")
    names = sorted(os.listdir(out)) if os.path.isdir(out) else []
    parts = {}
    others = []
    for n in names:
        m = PART.match(n)
        if m and m.group(1) == "data.bin":
            parts.setdefault(int(m.group(3)), []).append(n)
        elif n != "SHA256SUMS":
            others.append(n)
    if others:
        problems.append("left behind: " + ", ".join(others))
    if len(parts) > 1:
        problems.append("parts of two counts: " + ", ".join(sorted(sum(parts.values(), []))))
    complete = False
    if len(parts) == 1:
        count, present = next(iter(parts.items()))
        complete = len(present) == count
        if complete:
            joined = b"".join(open(os.path.join(out, n), "rb").read() for n in sorted(present))
            if joined != data:
                problems.append("a complete set of parts that does not concatenate to the input")
        elif sig != signal.SIGKILL:
            problems.append(f"{len(present)} of {count} parts left after {sig.name}")
    if "SHA256SUMS" in names:
        if not complete:
            problems.append("SHA256SUMS beside an incomplete set of parts")
        c = subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=out, capture_output=True)
        if c.returncode != 0:
            problems.append("sha256sum -c fails in the output folder: " + c.stdout.decode(errors="replace").strip())
    elif complete and sig != signal.SIGKILL:
        problems.append(f"every part but no SHA256SUMS after {sig.name}")
    if code == 0 and not (complete and "SHA256SUMS" in names):
        problems.append("exit 0 without the whole result: " + err.strip())
    outcome = "complete" if complete and "SHA256SUMS" in names else ("partial" if parts else "nothing")
    return outcome, problems


def main():
    tools, data_dir, source, tool, runs = sys.argv[1:6]
    runs = int(runs)
    rng = random.Random(int(sys.argv[6]) if len(sys.argv) > 6 else int(time.time()))
    base = tempfile.mkdtemp(prefix="aff-kill-")
    failures = 0
    tally = {}
    try:
        # Inputs made once and copied (symlinked) into each run's directory.
        inputs = os.path.join(base, "inputs")
        os.makedirs(inputs)
        if tool == "aff-quantize":
            subprocess.run([sys.executable, f"{source}/tests/cli/aff-quantize/make_checkpoint.py", "big", data_dir,
                            os.path.join(inputs, "ck"), "384"], check=True)
            argv = [f"{tools}/aff-quantize", "--src", "ck", "--out", "out.aff", "--threads", "2", "--gpus", "0",
                    "--progress", "never"]
        elif tool == "aff-split":
            data = bytes(rng.getrandbits(8) for _ in range(1 << 16)) * 96  # 6 MiB
            open(os.path.join(inputs, "data.bin"), "wb").write(data)
            argv = [f"{tools}/aff-split", "data.bin", "--max-size", "512KiB", "-o", "out", "--progress", "never"]
        else:
            sys.exit(f"kill_test.py: unknown tool {tool}")

        def prepare(work):
            os.makedirs(work)
            for n in os.listdir(inputs):
                os.symlink(os.path.join(inputs, n), os.path.join(work, n))
            if tool == "aff-split":
                os.makedirs(os.path.join(work, "out"))

        # How long an uninterrupted run takes: the signals land anywhere within it.
        calib = os.path.join(base, "calibrate")
        prepare(calib)
        t0 = time.monotonic()
        p = subprocess.run(argv, cwd=calib, capture_output=True)
        duration = time.monotonic() - t0
        if p.returncode != 0:
            sys.exit(f"kill_test.py: {tool} fails uninterrupted: {p.stderr.decode(errors='replace')}")
        shutil.rmtree(calib)

        sigs = [signal.SIGKILL, signal.SIGINT, signal.SIGTERM]
        for i in range(runs):
            work = os.path.join(base, f"run{i}")
            prepare(work)
            sig = sigs[i % 3]
            delay = rng.uniform(0, duration * 1.1)
            code, err = run_tool(argv, work, delay, sig)
            if tool == "aff-quantize":
                outcome, problems = check_quantize(tools, work, code, sig, err)
            else:
                outcome, problems = check_split(tools, work, code, sig, err, data)
            if not status_ok(code, sig, outcome):
                problems.append(f"exit status {code} for {sig.name}: {err.strip()}")
            key = f"{sig.name}:{outcome}"
            tally[key] = tally.get(key, 0) + 1
            for pr in problems:
                failures += 1
                print(f"FAIL run {i} ({sig.name} after {delay:.3f} s): {pr}")
            shutil.rmtree(work)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{tool}: {runs} runs, uninterrupted {duration:.2f} s, {failures} failures; " +
          ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
