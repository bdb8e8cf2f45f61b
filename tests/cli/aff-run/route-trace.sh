# --route-trace on the CPU path: a 3-token prompt and 3 generated tokens make 3 steps (the
# prompt, then the two generated tokens that are run; the last one needs no forward) of
# every layer of the fixture, 5 tokens, identity of the checkpoint; the generated tokens
# are those of a run without the trace.
aff-run -m "$DATA/models/tiny-a" --gpus 0 --tokens 1,2,3 -n 3 --temp 0 --no-echo --route-trace r.aft 2>/dev/null > with.txt
aff-run -m "$DATA/models/tiny-a" --gpus 0 --tokens 1,2,3 -n 3 --temp 0 --no-echo 2>/dev/null > without.txt
cmp with.txt without.txt
aff-trace summary --json r.aft | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(s["identity_kind"], s["layers"], s["steps"], s["token_steps"], s["phases"]["prefill"]["tokens"], s["phases"]["decode"]["tokens"])'
