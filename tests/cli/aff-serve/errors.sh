# Every bad request gets its status and an OpenAI error object, and the server keeps
# serving: malformed JSON, wrong types, unknown roles, n > 1, a prompt over the
# context, a body over the limit, bad UTF-8, missing or wrong API key, unknown path,
# wrong method.
. "$SRC/tests/cli/aff-serve/server.bash"
start_server --test-engine --ctx-size 256 --max-body 4KiB --api-key k
wait_ready
check() {  # check STATUS PARAM CURL-ARGS...
  local want=$1 param=$2
  shift 2
  local got
  got=$(curl -s -o out.json -w '%{http_code}' -H 'Authorization: Bearer k' "$@")
  [ "$got" = "$want" ] || { echo "status $got, expected $want for $*"; cat out.json; exit 1; }
  # the server writes compact JSON with sorted keys: {"error":{"code":..,"message":..,"param":..,"type":..}}
  [ "$param" = null ] && want_param='"param":null' || want_param="\"param\":\"$param\""
  grep -Eq '^\{"error":\{"code":(null|"[a-z_0-9]+"),"message":"[^"]+.*",'"$(printf '%s' "$want_param" | sed 's/[][]/\\&/g')"',"type":"[a-z_]+"\}\}$' out.json ||
    { echo "error object for $*:"; cat out.json; exit 1; }
}
C=$BASE/v1/chat/completions
check 400 null "$C" -d '{"messages": [' 
check 400 null "$C" -d '"just a string"'
check 400 temperature "$C" -d '{"temperature": "hot", "messages": [{"role": "user", "content": "x"}]}'
check 400 'messages[0].role' "$C" -d '{"messages": [{"role": "wizard", "content": "x"}]}'
check 400 n "$C" -d '{"n": 3, "messages": [{"role": "user", "content": "x"}]}'
check 400 messages "$C" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"$(head -c 400 /dev/zero | tr '\0' a)\"}]}"
check 413 null "$C" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"$(head -c 5000 /dev/zero | tr '\0' a)\"}]}"
printf '{"messages": [{"role": "user", "content": "\xff\xfe"}]}' > bad-utf8.json
check 400 null "$C" --data-binary @bad-utf8.json
grep -qF '"code":"invalid_utf8"' out.json
check 400 prompt "$BASE/v1/completions" -d '{"prompt": [1, 99999]}'
check 404 null "$BASE/v1/nothing"
check 405 null -X GET "$C"
[ "$(curl -s -o out.json -w '%{http_code}' "$BASE/v1/models")" = 401 ]
grep -qF '"code":"invalid_api_key"' out.json
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "$BASE/v1/models")" = 401 ]
# a chunked request body is accepted, and the server is still healthy
[ "$(curl -s -o out.json -w '%{http_code}' -H 'Authorization: Bearer k' -H 'Transfer-Encoding: chunked' \
      "$C" -d '{"max_tokens": 50, "messages": [{"role": "user", "content": "ok"}]}')" = 200 ]
[ "$(json_get out.json 'j.choices[0].message.content')" = 'You said: ok' ]
[ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/health")" = 200 ]
