# --draft auto's memory (libaff/runtime/draft_memory.hpp) on the trained checkpoint (its MTP
# layer on the CPU): the first run measures both ways and writes one file under
# $AFF_CACHE_DIR (run_case.sh gives each case an empty one); the second starts from it and
# says so; greedy output is the same throughout. --draft-memory FILE keeps it there instead,
# off keeps none, a corrupt file is ignored with one warning and replaced, and --draft-memory
# with --draft mtp is refused before the model loads.
m="$DATA/models/tiny-trained"
run() { aff-run -m "$m" -p 'def fibonacci(n):' -n 48 --temp 0 --gpus 0 "$@"; }
run --draft off >plain.txt 2>/dev/null
run >first.txt 2>first.err
cmp plain.txt first.txt
! grep -q 'drafts: from' first.err
[ "$(ls "$AFF_CACHE_DIR" | wc -l)" = 1 ]
f=$(ls "$AFF_CACHE_DIR"/draft-gate-*.json)
grep -q '"format": "aff-draft-memory"' "$f"
grep -Eq '"plain_tokens_per_second": [0-9.e+]+' "$f"
run >second.txt 2>second.err
cmp plain.txt second.txt
grep -Eqx "aff-run: drafts: from $f: (plain steps first \(drafts measured|drafting first \(measured) [0-9.]+ x as fast.*" second.err
run --draft-memory mem.json >third.txt 2>third.err
cmp plain.txt third.txt
! grep -q 'drafts: from' third.err
grep -q '"format": "aff-draft-memory"' mem.json
run --draft-memory mem.json >/dev/null 2>fourth.err
grep -Eq '^aff-run: drafts: from mem.json: ' fourth.err
run --draft-memory off >/dev/null 2>off.err
! grep -q 'drafts: from' off.err
[ "$(ls "$AFF_CACHE_DIR" | wc -l)" = 1 ]
echo garbage >mem.json
run --draft-memory mem.json >/dev/null 2>bad.err
[ "$(grep -c 'draft memory' bad.err)" = 1 ]
grep -qx 'aff-run: draft memory mem.json ignored: not JSON' bad.err
grep -q '"format": "aff-draft-memory"' mem.json
set +e
run --draft mtp --draft-memory mem.json >/dev/null 2>refused.err
status=$?
set -e
[ $status = 2 ]
grep -qx 'aff-run: --draft-memory keeps what --draft auto measured: it does nothing with --draft mtp' refused.err
