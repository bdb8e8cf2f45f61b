# One generation runs and --queue-size more may wait; the next gets 503 with
# Retry-After at once, while the running and the queued one complete.
. "$SRC/tests/cli/aff-serve/server.bash"
start_server --test-engine --test-engine-delay-ms 20 --queue-size 1 --max-tokens-floor 0
wait_ready
body='{"max_tokens": 40, "messages": [{"role": "user", "content": "count"}]}'
curl -s -o first.json "$BASE/v1/chat/completions" -d "$body" &
first=$!
sleep 0.3
curl -s -o second.json "$BASE/v1/chat/completions" -d "$body" &
second=$!
sleep 0.3
code=$(curl -s -D headers -o third.json -w '%{http_code}' "$BASE/v1/chat/completions" -d "$body")
[ "$code" = 503 ] || { echo "third request got $code"; exit 1; }
grep -qi '^retry-after: [0-9]' headers
[ "$(json_get third.json 'j.error.code')" = queue_full ]
wait $first $second
[ "$(json_get first.json 'j.choices[0].finish_reason')" = length ]
[ "$(json_get second.json 'j.choices[0].finish_reason')" = length ]
curl -s "$BASE/metrics" | grep -qx 'aff_queue_rejections_total 1'
