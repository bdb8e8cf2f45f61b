# aff-serve with the trained model's MTP drafts (--draft mtp, the CPU path): the ready line
# names the drafter; a greedy completion is the one a server without drafts (--draft off)
# gives, byte for byte; its timings carry the draft counts (accepted no more than drafted,
# one acceptance share per draft position) and /metrics the same totals; the server without
# drafts reports none. Bad values stop the server with one line and status 2.
. "$SRC/tests/cli/aff-serve/server.bash"
body='{"max_tokens": 40, "temperature": 0, "prompt": "def fibonacci(n):"}'
start_server -m "$DATA/models/tiny-trained" --threads 1 --gpus 0 --draft mtp --draft-max 4
wait_ready
grep -q '^aff-serve: ready: tiny-trained loaded in [0-9.]* s (context [0-9]* tokens; cpu: the reference forward; prefix cache 4.00 GiB; drafts: mtp, up to 4 a step)$' server.log
curl -s "$BASE/v1/completions" -o drafted.json -d "$body"
curl -s "$BASE/metrics" -o metrics.txt
kill $SERVER_PID; wait $SERVER_PID 2>/dev/null || true
[ "$(json_get drafted.json 'j.usage.completion_tokens')" = 40 ]
json_get drafted.json 'j.timings.draft_n > 0 && j.timings.draft_n_accepted > 0 && j.timings.draft_n_accepted <= j.timings.draft_n' | grep -qx true
json_get drafted.json 'j.timings.draft_acceptance_by_position.length === 4 && j.timings.draft_acceptance_by_position.every(x => x >= 0 && x <= 1)' | grep -qx true
drafted=$(json_get drafted.json 'j.timings.draft_n')
accepted=$(json_get drafted.json 'j.timings.draft_n_accepted')
grep -qx "aff_draft_tokens_total $drafted" metrics.txt
grep -qx "aff_draft_accepted_tokens_total $accepted" metrics.txt
grep -q '^aff_draft_position_accepted_total{position="3"} [0-9]*$' metrics.txt

start_server -m "$DATA/models/tiny-trained" --threads 1 --gpus 0 --draft off
wait_ready
grep -q '; drafts off)$' server.log
curl -s "$BASE/v1/completions" -o plain.json -d "$body"
curl -s "$BASE/metrics" -o metrics-off.txt
[ "$(json_get plain.json 'j.choices[0].text')" = "$(json_get drafted.json 'j.choices[0].text')" ]
json_get plain.json '"draft_n" in j.timings' | grep -qx false
! grep -q aff_draft metrics-off.txt

for args in "--draft sometimes" "--draft-max 0"; do
  set +e
  aff-serve --port 0 -m "$DATA/models/tiny-trained" $args 2>err
  status=$?
  set -e
  [ $status = 2 ]
  [ "$(grep -c . err)" -le 2 ]  # the error and CLI11's usage hint
done
