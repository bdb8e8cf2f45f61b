# /health answers 503 while the engine loads, 200 once ready; generation requests
# get 503 with Retry-After meanwhile.
. "$SRC/tests/cli/aff-serve/server.bash"
start_server --test-engine --test-engine-load-ms 1500
[ "$(curl -s -o health.json -w '%{http_code}' "$BASE/health")" = 503 ]
[ "$(json_get health.json 'j.status')" = loading ]
code=$(curl -s -D headers -o out.json -w '%{http_code}' "$BASE/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "x"}]}')
[ "$code" = 503 ]
grep -qi '^retry-after:' headers
[ "$(json_get out.json 'j.error.code')" = model_loading ]
wait_ready
[ "$(curl -s "$BASE/health")" = '{"status":"ok"}' ]
