# A streamed chat reply is SSE as OpenAI frames it: every event one `data:` line and a
# blank line, chunks of one id, a role delta first, finish_reason last, then usage and
# data: [DONE]; headers say text/event-stream over chunked transfer.
. "$SRC/tests/cli/aff-serve/server.bash"
start_server --test-engine --max-tokens-floor 0
wait_ready
curl -sN -D headers -o body "$BASE/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}'
grep -qi '^content-type: text/event-stream' headers
grep -qi '^transfer-encoding: chunked' headers
# framing: odd lines are data lines, even lines blank
awk 'NR % 2 == 1 && !/^data: / { print "not a data line: " $0; exit 1 }
     NR % 2 == 0 && $0 != ""   { print "not blank: " $0; exit 1 }' body
[ "$(tail -n 2 body | head -n 1)" = "data: [DONE]" ]
node -e '
const lines = require("fs").readFileSync("body", "utf8").split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
const chunks = lines.slice(0, -1).map(JSON.parse);
const assert = require("assert");
assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
assert.ok(chunks.every((c) => c.object === "chat.completion.chunk"));
assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
assert.equal(text, "You said: hi");
const fin = chunks[chunks.length - 2];
assert.equal(fin.choices[0].finish_reason, "stop");
assert.equal(typeof fin.timings.predicted_per_second, "number");
const usage = chunks[chunks.length - 1];
assert.deepEqual(usage.choices, []);
assert.equal(usage.usage.completion_tokens, 13);
'
