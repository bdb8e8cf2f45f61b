# aff-serve with --draft auto keeps what its gate measured (libaff/runtime/draft_memory.hpp):
# a server on the trained model's checkpoint (MTP on the CPU) answers a completion, writes its
# memory to --draft-memory's file after it, and again when stopped (SIGTERM); the next server
# on the same model and backend says in its ready line that it starts from it and answers the same text,
# and so does a server after an aff-run on the same model, backend and threads.
# --draft-memory with --draft mtp stops the server with one line and status 2. (The last
# server is left to server.bash's exit trap, which fails on one already gone.)
. "$SRC/tests/cli/aff-serve/server.bash"
body='{"max_tokens": 40, "temperature": 0, "prompt": "def fibonacci(n):"}'
start_server -m "$DATA/models/tiny-trained" --threads 1 --gpus 0 --draft-memory mem.json
wait_ready
! grep -q 'drafts: from' server.log
curl -s "$BASE/v1/completions" -o first.json -d "$body"
grep -q '"format": "aff-draft-memory"' mem.json  # written after the first generation, while it runs
rm mem.json
kill $SERVER_PID; wait $SERVER_PID 2>/dev/null || true
grep -q '"format": "aff-draft-memory"' mem.json  # and again when it stops
start_server -m "$DATA/models/tiny-trained" --threads 1 --gpus 0 --draft-memory mem.json
wait_ready
grep -Eq '; drafts: mtp, up to 3 a step, while faster than without; drafts: from mem.json: (plain steps|drafting) first \(.*\)\)$' server.log
curl -s "$BASE/v1/completions" -o second.json -d "$body"
kill $SERVER_PID; wait $SERVER_PID 2>/dev/null || true
[ "$(json_get first.json 'j.choices[0].text')" = "$(json_get second.json 'j.choices[0].text')" ]
# aff-run on the same model, backend and threads keeps the same memory the server reads.
aff-run -m "$DATA/models/tiny-trained" -p 'def f' -n 24 --temp 0 --threads 1 --gpus 0 --draft-memory shared.json >/dev/null 2>&1
start_server -m "$DATA/models/tiny-trained" --threads 1 --gpus 0 --draft-memory shared.json
wait_ready
grep -Eq '; drafts: from shared.json: (plain steps|drafting) first' server.log
set +e
aff-serve --port 0 -m "$DATA/models/tiny-trained" --threads 1 --gpus 0 --draft mtp --draft-memory mem.json 2>err
status=$?
set -e
[ $status = 2 ]
grep -qx 'aff-serve: --draft-memory keeps what --draft auto measured: it does nothing with --draft mtp' err
