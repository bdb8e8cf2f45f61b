# aff-serve with DSpark drafts (--draft dspark, the CPU path) on the random checkpoint with
# mtp.0..2 DSpark stages (the dspark_model fixture) and a byte-level tokenizer: the ready line
# names the drafter, a greedy completion is byte for byte the one without drafts (--draft off),
# and its timings carry the draft counts; then the MTP layer of the trained model's container
# served from its draft container beside it (aff-quantize --dspark), greedy-identical too
# (--draft dspark there stops the server with one line and status 2).
. "$SRC/tests/cli/aff-serve/server.bash"
byte_tokenizer tok.json
body='{"max_tokens": 24, "temperature": 0, "prompt": "abcabcabc"}'
start_server -m "$AFF_DSPARK_MODEL_DIR" --tokenizer tok.json --threads 1 --gpus 0 --draft dspark --draft-max 4
wait_ready
grep -q '; drafts: dspark, up to 4 a step)$' server.log
curl -s "$BASE/v1/completions" -o drafted.json -d "$body"
kill $SERVER_PID; wait $SERVER_PID 2>/dev/null || true
[ "$(json_get drafted.json 'j.usage.completion_tokens')" = 24 ]
json_get drafted.json 'j.timings.draft_n > 0 && j.timings.draft_n_accepted <= j.timings.draft_n' | grep -qx true
start_server -m "$AFF_DSPARK_MODEL_DIR" --tokenizer tok.json --threads 1 --gpus 0 --draft off
wait_ready
curl -s "$BASE/v1/completions" -o plain.json -d "$body"
kill $SERVER_PID; wait $SERVER_PID 2>/dev/null || true
[ "$(json_get plain.json 'JSON.stringify(j.choices[0].text)')" = "$(json_get drafted.json 'JSON.stringify(j.choices[0].text)')" ]

cp "$DATA/models/tiny-trained.aff" trained.aff
aff-quantize --dspark --codebook trained.aff --src "$DATA/models/tiny-trained" --out trained.dspark.aff --progress never 2>/dev/null
set +e
aff-serve --port 0 -m trained.aff --threads 1 --gpus 0 --draft dspark 2>err
status=$?
set -e
[ $status = 2 ]
grep -q '^aff-serve: --draft dspark: the model has no DSpark stages' err
body='{"max_tokens": 32, "temperature": 0, "prompt": "def fibonacci(n):"}'
start_server -m trained.aff --threads 1 --gpus 0 --draft mtp --draft-max 4
wait_ready
grep -q '; drafts: mtp, up to 4 a step)$' server.log
curl -s "$BASE/v1/completions" -o cdrafted.json -d "$body"
kill $SERVER_PID; wait $SERVER_PID 2>/dev/null || true
start_server -m trained.aff --threads 1 --gpus 0 --draft off
wait_ready
curl -s "$BASE/v1/completions" -o cplain.json -d "$body"
[ "$(json_get cplain.json 'j.choices[0].text')" = "$(json_get cdrafted.json 'j.choices[0].text')" ]
json_get cdrafted.json 'j.timings.draft_n_accepted > 0' | grep -qx true
