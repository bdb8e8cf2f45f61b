# A checkpoint directory that holds its own tokenizer.json is served without
# --tokenizer: tiny-a (vocabulary 256, random weights) beside a byte-level tokenizer.json
# written here (one token per byte, no merges). Chat and completion usage counts are
# then byte counts of the rendered prompt, and the model id is the directory's name.
. "$SRC/tests/cli/aff-serve/server.bash"
mkdir tiny
ln -s "$DATA/models/tiny-a/config.json" "$DATA/models/tiny-a/model.safetensors" tiny/
byte_tokenizer tiny/tokenizer.json
start_server -m tiny --threads 1 --max-tokens-floor 0
wait_ready
grep -q 'ready: tiny loaded in' server.log
[ "$(curl -s "$BASE/v1/models" | node -e 'console.log(JSON.parse(require("fs").readFileSync(0)).data[0].id)')" = tiny ]
curl -s "$BASE/v1/chat/completions" -o chat.json \
  -d '{"max_tokens": 3, "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}'
rendered='<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>'
[ "$(json_get chat.json 'j.usage.prompt_tokens')" = "$(printf '%s' "$rendered" | wc -c)" ]
[ "$(json_get chat.json 'j.object')" = chat.completion ]
n=$(json_get chat.json 'j.usage.completion_tokens')
[ "$n" -ge 1 ]
[ "$n" -le 3 ]
curl -s "$BASE/v1/completions" -o comp.json -d '{"max_tokens": 2, "temperature": 0, "prompt": "abc"}'
[ "$(json_get comp.json 'j.usage.prompt_tokens')" = 4 ]  # BOS + three bytes
