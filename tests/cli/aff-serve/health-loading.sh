# /health answers 503 while the engine loads, 200 once ready; generation requests
# get 503 with Retry-After meanwhile. Both requests go out before anything is parsed
# (node takes a while to start on a busy machine) and the load lasts 3 s.
. "$SRC/tests/cli/aff-serve/server.bash"
start_server --test-engine --test-engine-load-ms 3000
health=$(curl -s -o health.json -w '%{http_code}' "$BASE/health")
code=$(curl -s -D headers -o out.json -w '%{http_code}' "$BASE/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "x"}]}')
[ "$health" = 503 ]
[ "$code" = 503 ]
[ "$(json_get health.json 'j.status')" = loading ]
grep -qi '^retry-after:' headers
[ "$(json_get out.json 'j.error.code')" = model_loading ]
wait_ready
[ "$(curl -s "$BASE/health")" = '{"status":"ok"}' ]
