# A streaming client that goes away stops its generation before the next token: the
# generated-token counter stops growing at once and the cancel is counted.
. "$SRC/tests/cli/aff-serve/server.bash"
start_server --test-engine --test-engine-delay-ms 10 --max-tokens-floor 0
wait_ready
curl -sN --max-time 0.5 -o /dev/null "$BASE/v1/chat/completions" \
  -d '{"stream": true, "max_tokens": 100000, "messages": [{"role": "user", "content": "count"}]}' || true
sleep 0.2
metric() { curl -s "$BASE/metrics" | sed -n "s/^$1 //p"; }
[ "$(metric aff_generations_cancelled_total)" = 1 ]
a=$(metric aff_generated_tokens_total)
sleep 0.3
b=$(metric aff_generated_tokens_total)
[ "$a" = "$b" ] || { echo "still generating: $a then $b"; exit 1; }
# 0.5 s at 10 ms a token is about 50 tokens; far from the 100000 asked for
[ "$a" -lt 100 ] || { echo "generated $a tokens"; exit 1; }
