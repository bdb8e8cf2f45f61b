# Piped, aff-serve's live view is plain stats lines on stderr, printed while figures change:
# after one request a line counts it; no escape codes anywhere. --ui with a bad mode is usage.
. "$SRC/tests/cli/aff-serve/server.bash"
byte_tokenizer tok.json
start_server -m "$DATA/models/tiny-a" --tokenizer tok.json --threads 1 --gpus 0 --ui-interval-ms 50
wait_ready
curl -s "$BASE/v1/completions" -o comp.json -d '{"max_tokens": 7, "temperature": 0, "prompt": "abc"}'
for _ in $(seq 100); do grep -q 'stats .* done=1 ' server.log && break; sleep 0.05; done
grep -Eq '^aff-serve: stats t=[0-9.]+s prefill=[0-9.]+tok/s decode=[0-9.]+tok/s .* prompt=4 cached=0 generated=7 queued=0 running=0 done=1 drafts=off tiers=all-resident-CPU$' server.log
! grep -q $'\e' server.log
set +e
aff-serve --test-engine --ui fancy 2>err
status=$?
set -e
[ $status = 2 ]
grep -q "^aff-serve: --ui: .*fancy.* not in {auto,dash,plain}$" err
