# One log line per request (method, path, status, tokens, ms) and no prompt text,
# unless --log-prompts asks for it. Keep-alive: curl reuses one connection.
. "$SRC/tests/cli/aff-serve/server.bash"
start_server --test-engine --max-tokens-floor 0
wait_ready
curl -sv -o /dev/null -o /dev/null "$BASE/v1/models" "$BASE/v1/chat/completions" \
  -d '{"messages": [{"role": "user", "content": "secret words"}]}' 2>curl.log
grep -q 'Re-using existing connection' curl.log
sleep 0.1
grep -Eq '^aff-serve: POST /v1/chat/completions 200 prompt=[0-9]+ cached=0 completion=23 [0-9]+ms$' server.log
! grep -q 'secret words' server.log
kill $SERVER_PID; wait $SERVER_PID || true
start_server --test-engine --log-prompts
wait_ready
curl -s -o /dev/null "$BASE/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "secret words"}]}'
sleep 0.1
grep -q 'prompt: .*secret words' server.log
