#!/usr/bin/env python3
"""Checks a route trace that aff-run recorded with drafts (--draft mtp --route-trace) against
the acceptance line the same run printed, as formats/route-trace.md §5.1 defines the phases:
one prefill step first and none after; decode steps of one token; as many draft-verify steps
as the line's verify calls, each of 2 to K+1 tokens; a replay step right after exactly the
verify steps that kept only part of their guesses, re-running their first tokens (ids and
positions) with the same number of layers; every step of one phase at consecutive positions;
draft steps (the MTP layer's calls, layer L alone) either absent or exactly K right before
each verify step and none before any other step, the j-th of them ending with the verify
step's j-th token one position before it (the catch-up's last token, then each further guess's
step running the guess before it); with --expect-drafts they must be there (both backends
record them: the CPU's Model::mtp_forward, the GPU's GpuModel::mtp_forward); and the guesses kept (all of a verify step's without a replay, the replay's tokens less one
otherwise) averaging the line's mean accepted length. The steps are read by the independent
reader (read_route_trace.py), which needs the zstd command for aff-run's zstd chunks; without
it, and given AFF_TRACE, only aff-trace summary's per-phase token counts are checked (bounds;
with --expect-drafts at least K draft tokens a verify call).

usage: check_draft_trace.py [--expect-drafts] TRACE K "aff-run: drafts: C verify calls, A of K ..." [AFF_TRACE]
Prints one PASS or FAIL line; exit status 0 on PASS.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_route_trace import Reject, read_trace  # noqa: E402

PREFILL, DECODE, VERIFY, REPLAY, DRAFT = 0, 1, 2, 3, 4


def check_steps(h, steps, k, calls, mean, expect_drafts=False):
    phases = [toks[0][3] for toks, _ in steps]
    if not phases or phases[0] != PREFILL or PREFILL in phases[1:]:
        return "not one prefill step first"
    # The MTP layer's calls: either none (a trace of a build that did not record them), or the
    # k that proposed each verify step's guesses right before it, and none before other steps.
    recorded_drafts = DRAFT in phases
    if expect_drafts and not recorded_drafts:
        return "no draft steps (the MTP layer's calls of layer L)"
    verify = accepted = drafts_before = 0
    for i, (toks, blocks) in enumerate(steps):
        if len({t[3] for t in toks}) != 1:
            return "step %d: tokens of several phases" % i
        if phases[i] == DRAFT:
            if [b[0] for b in blocks] != [h["layers"]]:
                return "step %d: a draft step not of layer L alone" % i
            drafts_before += 1
            continue
        if recorded_drafts and drafts_before != (k if phases[i] == VERIFY else 0):
            return "step %d: %d draft steps before it (K = %d)" % (i, drafts_before, k)
        if recorded_drafts and phases[i] == VERIFY:
            # The j-th draft step's last token is the verify step's j-th, one position before it.
            for j in range(min(k, len(toks))):
                last = steps[i - k + j][0][-1]
                if last[0] != toks[j][0] or last[2] + 1 != toks[j][2]:
                    return "step %d: draft step %d ends with token %d at %d, the verify step has %d at %d" % (
                        i, i - k + j, last[0], last[2], toks[j][0], toks[j][2])
        drafts_before = 0
        if [t[2] for t in toks] != list(range(toks[0][2], toks[0][2] + len(toks))):
            return "step %d: positions not consecutive" % i
        if phases[i] == DECODE and len(toks) != 1:
            return "step %d: a decode step of %d tokens" % (i, len(toks))
        if phases[i] == REPLAY and phases[i - 1] != VERIFY:
            return "step %d: a replay not right after a verify step" % i
        if phases[i] != VERIFY:
            continue
        verify += 1
        if not 2 <= len(toks) <= k + 1:
            return "step %d: a verify step of %d tokens (K = %d)" % (i, len(toks), k)
        if i + 1 < len(steps) and phases[i + 1] == REPLAY:
            replay, replay_blocks = steps[i + 1]
            if len(replay) >= len(toks) or [t[:3] for t in replay] != [t[:3] for t in toks[:len(replay)]]:
                return "step %d: its replay does not re-run its first tokens" % (i + 1)
            if [b[0] for b in replay_blocks] != [b[0] for b in blocks]:
                return "step %d: its replay's layers differ" % (i + 1)
            accepted += len(replay) - 1
        else:
            accepted += len(toks) - 1
    if verify != calls:
        return "%d verify steps, the acceptance line says %d verify calls" % (verify, calls)
    if abs(accepted / calls - mean) > 0.006:
        return "%.3f accepted on average, the acceptance line says %.2f" % (accepted / calls, mean)
    return "PASS %d steps: %d verify steps (= verify calls), %d replays, %d draft steps, %.2f accepted on average " \
           "(= the line)" % (len(steps), verify, phases.count(REPLAY), phases.count(DRAFT), accepted / calls)


def check_summary(aff_trace, trace, k, calls, expect_drafts=False):
    s = json.loads(subprocess.run([aff_trace, "summary", "--json", trace], capture_output=True, check=True).stdout)
    ph = {p: x["tokens"] for p, x in s["phases"].items()}
    verify = ph.get("draft-verify", 0)
    if not 2 * calls <= verify <= (k + 1) * calls:
        return "%d draft-verify tokens for %d verify calls of at most %d guesses" % (verify, calls, k)
    # k draft steps a verify call, each of one token or more.
    if expect_drafts and ph.get("draft", 0) < k * calls:
        return "%d draft tokens for %d verify calls of K = %d (at least K each)" % (ph.get("draft", 0), calls, k)
    return "PASS (aff-trace summary only: no zstd command for the reader) %d draft-verify tokens for %d verify calls, " \
           "%d replay tokens, %d draft tokens" % (verify, calls, ph.get("replay", 0), ph.get("draft", 0))


def main():
    args = sys.argv[1:]
    expect_drafts = bool(args) and args[0] == "--expect-drafts"
    if expect_drafts:
        args = args[1:]
    if len(args) not in (3, 4):
        sys.exit('usage: check_draft_trace.py [--expect-drafts] TRACE K "aff-run: drafts: ..." [AFF_TRACE]')
    trace, k, words = args[0], int(args[1]), args[2].split()
    try:
        calls, mean = int(words[2]), float(words[5])
    except (IndexError, ValueError):
        print("FAIL not an acceptance line: %r" % args[2])
        return 1
    if calls == 0:
        print("FAIL no verify calls")
        return 1
    if shutil.which("zstd") is None and len(args) == 4:
        verdict = check_summary(args[3], trace, k, calls, expect_drafts)
    else:
        try:
            with open(trace, "rb") as f:
                h, steps = read_trace(f.read())
        except (Reject, OSError) as e:
            print("FAIL %s: %s" % (trace, e))
            return 1
        verdict = check_steps(h, steps, k, calls, mean, expect_drafts)
    print(verdict if verdict.startswith("PASS") else "FAIL " + verdict)
    return 0 if verdict.startswith("PASS") else 1


if __name__ == "__main__":
    sys.exit(main())
