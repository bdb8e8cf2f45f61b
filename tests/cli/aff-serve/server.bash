# Sourced by the aff-serve CLI cases: start_server ARGS... runs aff-serve on a free
# loopback port in the background (log in ./server.log), waits until it listens,
# sets $BASE, and stops it when the case exits. json_get FILE EXPR prints a field.
# byte_tokenizer FILE writes a byte-level tokenizer.json for the 256-token fixtures.
start_server() {
  : > server.log  # exists before the background shell opens it, for the loop below
  aff-serve --port 0 "$@" 2>server.log &
  SERVER_PID=$!
  trap 'kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null || true' EXIT
  local port=""
  for _ in $(seq 200); do
    port=$(sed -n 's|.*listening on http://[^ ]*:\([0-9][0-9]*\)$|\1|p' server.log)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "aff-serve did not start"; cat server.log; return 1; }
  BASE=http://127.0.0.1:$port
}

wait_ready() {
  for _ in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/health")" = 200 ] && return 0
    sleep 0.05
  done
  echo "aff-serve not ready"; return 1
}

# json_get FILE 'expression over j' — prints the value (node is needed by the e2e tests anyway).
json_get() {
  node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(eval(process.argv[2]))' "$1" "$2"
}

# A byte-level BPE tokenizer.json with one token per byte and no merges: ids 0..255 as
# GPT-2's byte-to-unicode table orders them, the tiny fixtures' vocabulary.
byte_tokenizer() {
  node -e '
const bs = [];
for (let b = 33; b <= 126; b++) bs.push(b);
for (let b = 161; b <= 172; b++) bs.push(b);
for (let b = 174; b <= 255; b++) bs.push(b);
const cs = bs.slice();
for (let b = 0, n = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
const vocab = {};
bs.forEach((b, i) => { vocab[String.fromCodePoint(cs[i])] = b; });
console.log(JSON.stringify({ added_tokens: [], decoder: { type: "ByteLevel" },
  pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, use_regex: false },
  model: { type: "BPE", vocab, merges: [] } }));' > "$1"
}
